"""What a source lists: a file at a path relative to the source root, and the checksum the source vouches for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

#: Checksum kinds besides hashlib's names: Git's blob id, sha1 over a "blob <size>\\0" header and the content (the
#: Hub's oid for non-LFS files), S3's CRC-32 (base64 of the big-endian value, combined over ranges), and Cloud
#: Storage's CRC-32C (Castagnoli's polynomial; the big-endian value in hex, as CRC32's).
GIT_SHA1 = "git-sha1"
CRC32 = "crc32"
CRC32C = "crc32c"


@dataclass(frozen=True)
class Checksum:
    algorithm: str  # a hashlib name, GIT_SHA1 or CRC32
    hexdigest: str


class RemoteFile(NamedTuple):
    """One file a source offers, at a path relative to the source root (a named tuple: one is made per listed file,
    and no immutable record is cheaper to make)."""

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
