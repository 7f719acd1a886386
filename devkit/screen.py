"""What a terminal shows after receiving some output: the lines left on it, scrollback included, once carriage
returns, cursor-up moves and line erasures have done their work (the sequences a redrawn block uses; colours and
other sequences change no text). Lines are logical: a terminal's wrapping of a long line is not modelled."""

from __future__ import annotations

import re

_TOKENS = re.compile(r"(\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r|\n)")


def screen(received: str) -> list[str]:
    lines, row, col = [""], 0, 0
    for token in _TOKENS.split(received):
        if token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            final, argument = token[-1], token[2:-1]
            if final == "A":
                row = max(0, row - int(argument or 1))
            elif final == "K":
                lines[row] = "" if argument == "2" else lines[row][:col]
        elif token and not token.startswith("\x1b"):
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return [line.rstrip() for line in lines]
