"""Digests a source vouches for, and the hashers that check them: hashlib's, plus git's blob ids."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from typing import Any

_BLOCK_BYTES = 1 << 20
#: Git's blob id: sha1 over a "blob <size>\\0" header and the content (the Hub's oid for non-LFS files).
GIT_SHA1 = "git-sha1"
CRC32 = "crc32"


@dataclass(frozen=True)
class Checksum:
    algorithm: str  # a hashlib name, or GIT_SHA1
    hexdigest: str


class _Crc32:
    """zlib's CRC-32 with hashlib's interface (S3 stores it as a full-object checksum)."""

    def __init__(self) -> None:
        self._value = 0

    def update(self, data: bytes | memoryview) -> None:
        self._value = zlib.crc32(data, self._value)

    def hexdigest(self) -> str:
        return f"{self._value:08x}"


def new_hasher(checksum: Checksum, size: int) -> Any:
    """A hashlib-style object (update, hexdigest) that checks `checksum` over content of `size` bytes."""
    if checksum.algorithm == GIT_SHA1:
        hasher = hashlib.sha1(usedforsecurity=False)
        hasher.update(b"blob %d\0" % size)
        return hasher
    if checksum.algorithm == CRC32:
        return _Crc32()
    return hashlib.new(checksum.algorithm, usedforsecurity=False)


def file_hexdigest(path: str, checksum: Checksum, size: int) -> str:
    """The digest of the file at `path`, in `checksum`'s algorithm, read from disk."""
    hasher = new_hasher(checksum, size)
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            hasher.update(block)
    return str(hasher.hexdigest())
