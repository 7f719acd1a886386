"""DRY_RUN's output: the plan, a line per file (path and size) and a line of totals, as the listing streams.

On a terminal, a table for reading (rich, human sizes, imported only there); otherwise the plan alone on stdout
(the logs go to stderr), each line a JSON object: `{"path", "size"}` per file, then
`{"total_files", "total_bytes", "skipped_files", "skipped_bytes"}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

from initializers.common import human
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import Returning
from initializers.plan.selection import Selected

#: The size column's width: `1023.9 KiB` fits.
_SIZE_WIDTH = 10


def print_plan(planned: Iterable[list[RemoteFile]], out: TextIO) -> tuple[int, int]:
    """Print every planned file and the totals, with what the selection skipped (which `planned` returns);
    returns (files, bytes)."""
    writer = _Table(out) if out.isatty() else _JsonLines(out)
    files = size = 0
    batches: Returning[list[RemoteFile], Selected] = Returning(planned)
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
    """The plan for people: a table of sizes and paths, printed a batch at a time in fixed columns (a listing of a
    million files is not held to be laid out at once), and a total."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console

        self._console = Console(file=out, highlight=False)
        self._header = True

    def rows(self, batch: list[RemoteFile]) -> None:
        rows = [(human.size(file.size), file.path) for file in batch]
        if self._header:
            self._header = False
            rows.insert(0, ("size", "path"))
            self._print(rows, header=True)
        else:
            self._print(rows)

    def totals(self, files: int, size: int, skipped_files: int, skipped_bytes: int) -> None:
        if self._header:  # nothing planned: the header still says what the columns would have been
            self.rows([])
        self._console.rule(style="dim")
        skipped = f"{human.count(skipped_files, 'file')}, {human.size(skipped_bytes)} skipped by the patterns"
        self._print([(human.size(size), f"in {human.count(files, 'file')} to fetch ({skipped})")], style="bold")

    def _print(self, rows: list[tuple[str, str]], header: bool = False, style: str = "") -> None:
        from rich.table import Table
        from rich.text import Text

        table: Any = Table.grid(padding=(0, 2))
        table.add_column(justify="right", width=_SIZE_WIDTH, no_wrap=True)
        table.add_column(overflow="fold")
        for index, row in enumerate(rows):
            table.add_row(*(Text(cell) for cell in row), style="bold" if header and index == 0 else style)
        self._console.print(table)
