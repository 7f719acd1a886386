"""What a terminal may be sent, decided in one place for every writer (the console logs, the live view, the dry
run's table): colour only on a terminal, unless `NO_COLOR` is set and not empty (https://no-color.org) or `TERM` is
`dumb`; redrawing in place (the live view) on any terminal but a dumb one, with or without colour; and never a
control character of the data's (a source's file name may hold an escape sequence, which the terminal would obey)."""

from __future__ import annotations

import os
import re
from typing import Protocol

#: C0 controls, DEL and C1 controls: a terminal acts on them (ESC starts a sequence that can move the cursor, retitle
#: the window or rewrite what was printed) instead of showing them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class _Stream(Protocol):
    def isatty(self) -> bool: ...


def redraws(stream: _Stream) -> bool:
    """Whether `stream` is a terminal that can redraw in place: any but a dumb one."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def colours(stream: _Stream) -> bool:
    """Whether text written to `stream` may carry colour codes: a terminal that redraws, and NO_COLOR empty or unset.
    Without colour, no style code either (bold, dim): a writer then sends plain text."""
    return redraws(stream) and not os.environ.get("NO_COLOR")


def printable(text: str) -> str:
    """`text` with each control character as repr escapes it (`\\x1b`): a file named with one is shown, not obeyed."""
    return _CONTROL.sub(lambda control: repr(control[0])[1:-1], text)
