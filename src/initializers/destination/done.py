"""A file finished at its final path, as the run left it: what the journal records and re-runs check."""

from __future__ import annotations

import json
from typing import NamedTuple


class DoneFile(NamedTuple):
    """A file at its final path, as we left it: valid while its size and mtime are unchanged (a tuple, as
    `RemoteFile` is: one is made per file a re-run finds)."""

    path: str
    size: int
    version: str
    mtime_ns: int
    #: The checksum its bytes were verified against when fetched (None: none existed, only the size was checked).
    algorithm: str | None = None
    hexdigest: str | None = None

    def to_json(self) -> str:
        record: dict[str, object] = {"path": self.path, "size": self.size, "version": self.version}
        record["mtime_ns"] = self.mtime_ns
        if self.algorithm is not None:
            record.update(algorithm=self.algorithm, hexdigest=self.hexdigest)
        return json.dumps(record)
