"""DRY_RUN's output: the plan, a line per file (path and size) and a line of totals, as the listing streams.

On a terminal the lines are for reading; otherwise each is a JSON object, beside the JSON log lines on stdout:
`{"path", "size"}` per file, then `{"total_files", "total_bytes", "skipped_files", "skipped_bytes"}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TextIO

from initializers.common.remote_file import RemoteFile
from initializers.common.streams import Returning
from initializers.plan.selection import Selected


def print_plan(planned: Iterable[list[RemoteFile]], out: TextIO) -> tuple[int, int]:
    """Print every planned file and the totals, with what the selection skipped (which `planned` returns);
    returns (files, bytes)."""
    readable = out.isatty()
    files = size = 0
    batches: Returning[list[RemoteFile], Selected] = Returning(planned)
    for batch in batches:
        for file in batch:
            files += 1
            size += file.size
            out.write(f"{file.size:>16,}  {file.path}\n" if readable else json.dumps(_entry(file)) + "\n")
    skipped_files, skipped_bytes = batches.value.skipped_totals()
    if readable:
        out.write(f"{size:>16,}  in {files} files ({skipped_files} files, {skipped_bytes:,} bytes skipped)\n")
    else:
        totals = {"total_files": files, "total_bytes": size, "skipped_files": skipped_files,
                  "skipped_bytes": skipped_bytes}  # fmt: skip
        out.write(json.dumps(totals) + "\n")
    out.flush()
    return files, size


def _entry(file: RemoteFile) -> dict[str, object]:
    return {"path": file.path, "size": file.size}
