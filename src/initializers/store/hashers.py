"""How each kind of checksum is computed: a store declares the kinds it vouches for files with, each with its hasher
(`Source.checksum_kinds`), and the engine looks a file's checksum up there. The kinds hashlib computes, which several
stores use, are here; a kind only one store uses lives in its folder (the Hub's git blob id, S3's CRC-32, Cloud
Storage's CRC-32C), as rclone's backends register their own hashes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol


class Hasher(Protocol):
    """hashlib's interface, as much of it as verification uses."""

    def update(self, data: bytes | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


@dataclass(frozen=True)
class HashKind:
    """How one kind of checksum is computed."""

    #: Its name, as `Checksum.algorithm` and the manifest write it.
    name: str
    #: A hasher for content of the given size (git's blob id hashes the size first).
    new: Callable[[int], Hasher]
    #: For a bit-reflected 32-bit CRC with all-ones start and end, whose hex digest is its value's 8 digits: its
    #: polynomial, by which the CRCs of a file's ranges combine into the file's (ranges fetched in parallel are then
    #: checked without reading the file back). None: a file's ranges are hashed in order.
    crc_polynomial: int | None = None


class _Crc:
    """A CRC with hashlib's interface, its value extended over each update by `extend(value, data)`."""

    def __init__(self, extend: Callable[[int, bytes | memoryview], int]) -> None:
        self._extend = extend
        self._value = 0

    def update(self, data: bytes | memoryview) -> None:
        self._value = self._extend(self._value, data)

    def hexdigest(self) -> str:
        return f"{self._value:08x}"


def crc_kind(name: str, extend: Callable[[int, bytes | memoryview], int], polynomial: int) -> HashKind:
    """The kind of a CRC that `extend(value, data)` computes, whose ranges combine by `polynomial`."""
    return HashKind(name, lambda _size: _Crc(extend), polynomial)


def kinds(*declared: HashKind) -> Mapping[str, HashKind]:
    """A store's `checksum_kinds`: `declared`, by name."""
    return MappingProxyType({kind.name: kind for kind in declared})


MD5 = HashKind("md5", lambda _size: hashlib.md5(usedforsecurity=False))
SHA1 = HashKind("sha1", lambda _size: hashlib.sha1(usedforsecurity=False))
SHA256 = HashKind("sha256", lambda _size: hashlib.sha256())
