"""DRY_RUN's output: the plan, a line per file (path and size) and a line of totals.

On a terminal, a table for reading (rich, human sizes, imported only there), printed whole once the plan is complete;
otherwise the plan alone on stdout (the logs go to stderr), as the listing streams, each line a JSON object:
`{"path", "size"}` per file, then `{"total_files", "total_bytes", "skipped_files", "skipped_bytes"}`.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Iterable
from typing import TextIO

from initializers.common import human, terminal
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.plan.selection import Selected

#: The size column's width: `999.9 kB`, the widest `human.size` below a petabyte, fits.
_SIZE_WIDTH = 8
#: Columns between the size and the path.
_GAP = 2
#: Bytes of the table's rows held in memory while the plan is made; beyond, they wait in a temporary file.
_SPOOL_BYTES = 1 << 20
#: Rows written at once: a listing of a million files is never read back whole.
_ROWS_AT_ONCE = 1000


def print_plan(planned: Iterable[list[RemoteFile]], out: TextIO) -> tuple[int, int]:
    """Print the planned files, the totals and what `planned` returns as skipped; returns (files, bytes)."""
    with tempfile.SpooledTemporaryFile(_SPOOL_BYTES, mode="w+", encoding="utf-8", newline="\n") as spool:
        writer = _Table(out, spool) if out.isatty() else _JsonLines(out)
        files = size = 0
        batches: KeepsReturnValue[list[RemoteFile], Selected] = KeepsReturnValue(planned)
        for batch in batches:
            files += len(batch)
            size += sum(file.size for file in batch)
            writer.rows(batch)
        writer.totals(files, size, *batches.value.skipped_totals())
    out.flush()
    return files, size


class _JsonLines:
    """The plan for programs: a JSON object per line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def rows(self, batch: list[RemoteFile]) -> None:
        self._out.writelines(json.dumps({"path": file.path, "size": file.size}) + "\n" for file in batch)

    def totals(self, files: int, size: int, skipped_files: int, skipped_bytes: int) -> None:
        totals = {"total_files": files, "total_bytes": size, "skipped_files": skipped_files,
                  "skipped_bytes": skipped_bytes}  # fmt: skip
        self._out.write(json.dumps(totals) + "\n")


class _Table:
    """The plan for people, printed whole once the plan is complete, so what is logged meanwhile (the listing, a wait,
    the selection's `skipped`) comes before it, never between its lines. Its rows wait in `spool`, a temporary file
    beyond `_SPOOL_BYTES` (memory stays flat for a million files), then are written `_ROWS_AT_ONCE` at a time as plain
    lines (rich only styles the header and the total: laying out a million rows as tables would take minutes)."""

    def __init__(self, out: TextIO, spool: TextIO) -> None:
        self._out = out
        self._rows = spool

    def rows(self, batch: list[RemoteFile]) -> None:
        self._rows.writelines(json.dumps([file.size, file.path]) + "\n" for file in batch)  # a path's newline escaped

    def totals(self, files: int, size: int, skipped_files: int, skipped_bytes: int) -> None:
        from rich.console import Console
        from rich.text import Text

        console = Console(file=self._out, highlight=False, color_system="auto" if terminal.colours(self._out) else None)
        width = console.width  # asked of the terminal each time

        def bold(size_text: str, text: str) -> None:
            for line in _row(size_text, text, width):
                console.print(Text(line, style="bold"), overflow="ignore", crop=False)

        bold("size", "path")
        self._rows.seek(0)
        while chunk := list(itertools.islice(self._rows, _ROWS_AT_ONCE)):
            rows = (_row(human.size(file_size), path, width) for file_size, path in map(json.loads, chunk))
            self._out.write("".join(line + "\n" for row in rows for line in row))
        console.rule(style="dim")
        skipped = f"{human.count(skipped_files, 'file')}, {human.size(skipped_bytes)} skipped by the selection"
        bold(human.size(size), f"in {human.count(files, 'file')} to fetch ({skipped})")


def _row(size_text: str, text: str, width: int) -> list[str]:
    """A row's lines in `width` columns: the size right-aligned in `_SIZE_WIDTH`, then the text whole, as it is (a path
    is never markup; control characters shown as escapes, `terminal.printable`), folded under itself at the edge."""
    from rich.cells import chop_cells

    indent = _SIZE_WIDTH + _GAP
    first, *rest = chop_cells(terminal.printable(text), max(width - indent, 1)) or [""]
    return [f"{size_text:>{_SIZE_WIDTH}}{' ' * _GAP}{first}", *(" " * indent + piece for piece in rest)]
