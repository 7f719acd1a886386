"""A file finished at its final path, as the run left it: what the journal records and re-runs check."""

from __future__ import annotations

from json.encoder import encode_basestring_ascii as _json_string
from typing import Any, NamedTuple

from initializers.common.remote_file import Checksum, RemoteFile


class DoneFile(NamedTuple):
    """Valid while its size and mtime are unchanged; a tuple, as `RemoteFile`: one is made per file a re-run finds."""

    path: str
    size: int
    version: str
    mtime_ns: int
    #: The checksum its bytes were verified against when fetched (None: none existed, only the size was checked).
    algorithm: str | None = None
    hexdigest: str | None = None

    def verified_against(self, file: RemoteFile) -> Checksum | None:
        """The recorded checksum, else the listing's, which a fetch checks first (a record of an earlier format has
        none). None: only size and version were checked (an S3 ETag not an MD5), and nothing later can check more."""
        if self.algorithm is not None and self.hexdigest is not None:
            return Checksum(self.algorithm, self.hexdigest)
        return file.checksum

    @classmethod
    def from_record(cls, record: Any) -> DoneFile | None:
        """The file a journal line's JSON describes; None for anything else (the header, a marker, a damaged line):
        every field of its type, as `to_json` writes it."""
        if not isinstance(record, dict) or record.keys() - _FIELD_TYPES.keys():
            return None
        if all(type(record.get(name)) in types for name, types in _FIELD_TYPES.items()):  # one missing: None
            return cls(**record)
        return None

    def to_json(self) -> str:
        """The journal's line as `json.dumps` writes it, by hand: written for every file, at a third of the cost."""
        line = (
            f'{{"path": {_json_string(self.path)}, "size": {self.size:d}, "version": {_json_string(self.version)}, '
            f'"mtime_ns": {self.mtime_ns:d}'
        )
        if self.algorithm is not None and self.hexdigest is not None:
            line += f', "algorithm": {_json_string(self.algorithm)}, "hexdigest": {_json_string(self.hexdigest)}'
        return line + "}"


#: The types of a record's fields (exactly: a bool is no size): what `from_record` accepts and `to_json` writes.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "path": (str,),
    "size": (int,),
    "version": (str,),
    "mtime_ns": (int,),
    "algorithm": (str, type(None)),
    "hexdigest": (str, type(None)),
}
