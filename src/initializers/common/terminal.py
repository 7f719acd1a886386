"""What a terminal may be sent, decided in one place for every writer (the console logs, the live view, the dry
run's table): colour only on a terminal, unless `NO_COLOR` is set to anything (https://no-color.org) or `TERM` is
`dumb`; redrawing in place (the live view) on any terminal but a dumb one, with or without colour."""

from __future__ import annotations

import os
from typing import Protocol


class _Stream(Protocol):
    def isatty(self) -> bool: ...


def _dumb() -> bool:
    return os.environ.get("TERM") == "dumb"


def redraws(stream: _Stream) -> bool:
    """Whether `stream` is a terminal that can redraw in place: any but a dumb one."""
    return stream.isatty() and not _dumb()


def colours(stream: _Stream) -> bool:
    """Whether text written to `stream` may carry colour codes: a terminal that redraws, and NO_COLOR empty or unset.
    Without colour, no style code either (bold, dim): a writer then sends plain text."""
    return redraws(stream) and not os.environ.get("NO_COLOR")
