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
        rows = spool if out.isatty() else out
        files = size = 0
        batches: KeepsReturnValue[list[RemoteFile], Selected] = KeepsReturnValue(planned)
        for batch in batches:
            files += len(batch)
            size += sum(file.size for file in batch)
            rows.writelines(json.dumps({"path": file.path, "size": file.size}) + "\n" for file in batch)
        skipped_files, skipped_bytes = batches.value.skipped_totals()
        if rows is spool:
            _print_table(out, spool, files, size, skipped_files, skipped_bytes)
        else:
            totals = {"total_files": files, "total_bytes": size, "skipped_files": skipped_files,
                      "skipped_bytes": skipped_bytes}  # fmt: skip
            out.write(json.dumps(totals) + "\n")
    out.flush()
    return files, size


def _print_table(out: TextIO, rows: TextIO, files: int, size: int, skipped_files: int, skipped_bytes: int) -> None:
    """The plan for people, printed whole once the plan is complete, so what is logged meanwhile (the listing, a wait,
    the selection's `skipped`) comes before it, never between its lines. Its rows wait in `rows`, a temporary file
    beyond `_SPOOL_BYTES` (memory stays flat for a million files), then are written `_ROWS_AT_ONCE` at a time as plain
    lines (rich only styles the header and the total: laying out a million rows as tables would take minutes)."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False, color_system="auto" if terminal.colours(out) else None)
    width = console.width  # asked of the terminal each time

    def bold(size_text: str, text: str) -> None:
        for line in _row(size_text, text, width):
            console.print(Text(line, style="bold"), overflow="ignore", crop=False)

    bold("size", "path")
    rows.seek(0)
    while chunk := list(itertools.islice(rows, _ROWS_AT_ONCE)):
        lines = (_row(human.size(row["size"]), row["path"], width) for row in map(json.loads, chunk))
        out.write("".join(line + "\n" for row_lines in lines for line in row_lines))
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
