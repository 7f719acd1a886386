"""What a terminal shows after receiving some output: its rows, scrollback included, once carriage returns,
cursor-up moves and erasures have done their work (the sequences a redrawn block uses; colours and other sequences
change no text).

`Terminal` keeps a width and wraps at it, and a resize rewraps what is on it as tmux, VTE (GNOME Terminal), iTerm2,
kitty and Windows Terminal do: a line longer than the new width takes more rows, and the cursor moves with its text.
That is what leaves a redrawn block's old lines on screen when it moves up by the rows it drew rather than by those
they take now. Each character takes one column; the screen has no height (cursor-up stops at the first row only).
"""

from __future__ import annotations

import re

_TOKENS = re.compile(r"(\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r|\n)")


class Terminal:
    """A terminal `width` columns wide (None: lines never wrap), fed what a program writes (`feed`, or `write` as a
    file), resized (`resize`) and read (`rows`). A row is a list of cells, None where nothing was written."""

    def __init__(self, width: int | None = None) -> None:
        self.width = width
        self._rows: list[list[str | None]] = [[]]
        self._wrapped: list[bool] = [False]  # whether a row's line goes on in the next row
        self._row = self._col = 0

    def feed(self, text: str) -> Terminal:
        for token in _TOKENS.split(text):
            if token == "\n":  # a terminal's tty turns it into CR LF (onlcr)
                self._down()
            elif token == "\r":
                self._col = 0
            elif token.startswith("\x1b["):
                self._control(token[-1], token[2:-1])
            elif token and not token.startswith("\x1b"):
                for char in token:
                    self._put(char)
        return self

    def write(self, text: str) -> int:
        """As a file: a rich Console (or a program's stream) writing to this terminal."""
        self.feed(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def rows(self) -> list[str]:
        """The rows with text on them, as shown (nothing written reads as a space), from the first."""
        shown = ["".join(cell or " " for cell in row).rstrip() for row in self._rows]
        while shown and not shown[-1]:
            shown.pop()
        return shown

    def resize(self, width: int) -> None:
        """The terminal made `width` columns wide: each line rewrapped, the cursor kept on its character."""
        lines: list[list[str | None]] = []
        at = (0, 0)
        for index, row in enumerate(self._rows):
            if index == 0 or not self._wrapped[index - 1]:
                lines.append([])
            if index == self._row:
                at = (len(lines) - 1, len(lines[-1]) + self._col)
            lines[-1].extend(row if self._wrapped[index] else _trimmed(row))
        self.width, self._rows, self._wrapped = width, [], []
        for number, line in enumerate(lines):
            pieces = [line[start : start + width] for start in range(0, len(line), width)] or [[]]
            if number == at[0]:
                self._row, self._col = len(self._rows) + at[1] // width, at[1] % width
                if self._col == 0 and at[1] and at[1] >= len(line):  # just past the end of a full row: stays there
                    self._row, self._col = self._row - 1, width
                pieces += [[] for _ in range(self._row - len(self._rows) - len(pieces) + 1)]
            self._rows += pieces
            self._wrapped += [True] * (len(pieces) - 1) + [False]

    def _put(self, char: str) -> None:
        if self.width is not None and self._col >= self.width:  # the autowrap a full row waits for
            self._wrapped[self._row] = True
            self._down()
        row = self._rows[self._row]
        row.extend([None] * (self._col + 1 - len(row)))
        row[self._col] = char
        self._col += 1

    def _down(self) -> None:
        self._row, self._col = self._row + 1, 0
        if self._row == len(self._rows):
            self._rows.append([])
            self._wrapped.append(False)

    def _control(self, final: str, argument: str) -> None:
        if final == "A":
            self._row = max(0, self._row - int(argument or 1))
            self._col = min(self._col, self.width - 1) if self.width else self._col
        elif final == "K":  # erase in line: 0 (or none) from the cursor on, 2 all of it
            row = self._rows[self._row]
            self._rows[self._row] = [] if argument == "2" else row[: self._col]
            self._wrapped[self._row] = False
        elif final == "J" and argument in ("", "0"):  # erase below
            self._rows[self._row] = self._rows[self._row][: self._col]
            del self._rows[self._row + 1 :], self._wrapped[self._row + 1 :]
            self._wrapped[self._row] = False


def _trimmed(row: list[str | None]) -> list[str | None]:
    """A row's cells up to the last one written: what comes after is no text of its line."""
    end = len(row)
    while end and row[end - 1] is None:
        end -= 1
    return row[:end]


def screen(received: str) -> list[str]:
    """The logical lines a terminal shows after `received`, scrollback included (no wrapping at any width)."""
    return Terminal().feed(received).rows()
