"""What a source lists: a file at a path relative to the source root, and the checksum the source vouches for."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Checksum:
    algorithm: str  # one of the kinds its source declares (`Source.checksum_kinds`)
    hexdigest: str


class RemoteFile(NamedTuple):
    """One file a source offers: a named tuple, as one is made per listed file and no immutable record is cheaper."""

    path: str
    size: int
    version: str  # changes whenever the content changes (an ETag, a blob id)
    locator: str  # the source's own address for it (an S3 key, a repo path)
    checksum: Checksum | None = None  # a digest the source vouches for, verified after the download
    #: False for a file the source produces rather than copies (a rewritten Parquet part): `size` is then an
    #: estimate for progress and free space, and the size actually written is what gets recorded.
    exact_size: bool = True

    def matches(self, size: int, version: str) -> bool:
        """True when a file recorded with this size and version is the one the source offers now."""
        return version == self.version and (size == self.size or not self.exact_size)


def base64_digest(value: Any, length: int) -> bytes | None:
    """The digest of `length` bytes that `value`, base64 text, is (as Cloud Storage and Azure send one); None if not."""
    try:
        digest = base64.b64decode(value, validate=True)
    except (ValueError, TypeError):  # binascii.Error is a ValueError
        return None
    return digest if len(digest) == length else None
