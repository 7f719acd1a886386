"""A file finished at its final path, as the run left it: what the journal records and re-runs check."""

from __future__ import annotations

import json
from typing import NamedTuple

from initializers.common.remote_file import Checksum, RemoteFile


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

    def verified_against(self, file: RemoteFile) -> Checksum | None:
        """The checksum its bytes were verified against when fetched: the recorded one, else the listing's, which a
        fetch checks before any other (for a record an earlier format wrote without one). None: only the size and
        version were checked (an S3 object whose ETag is not its MD5), and nothing later can check more."""
        if self.algorithm is not None and self.hexdigest is not None:
            return Checksum(self.algorithm, self.hexdigest)
        return file.checksum

    def to_json(self) -> str:
        record: dict[str, object] = {"path": self.path, "size": self.size, "version": self.version}
        record["mtime_ns"] = self.mtime_ns
        if self.algorithm is not None:
            record.update(algorithm=self.algorithm, hexdigest=self.hexdigest)
        return json.dumps(record)
