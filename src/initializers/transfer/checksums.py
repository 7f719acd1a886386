"""Digests a source vouches for, and how a file is checked against one (`FileVerifier`): the one owner of content
verification. Hashers are the store's (`Source.checksum_kinds`): this module names none. A CRC of a file fetched as
ranges in parallel is combined from the ranges' CRCs in any order (`combined_crc`), so the whole-object checksum is
checked without reading the file again; any other digest of a ranged file is taken in order (`InOrderDigest`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from initializers.common.errors import FetchError, changed_during_download
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.store.hashers import Hasher, HashKind
from initializers.store.retry import Retriable

_BLOCK_BYTES = 1 << 20


class ChecksumMismatch(FetchError, Retriable):
    """A file's bytes do not hash to what its source vouched for: corrupted on the way, worth fetching again."""


def crc_combine(polynomial: int, crc_a: int, crc_b: int, length_b: int) -> int:
    """crc(a + b) from crc(a), crc(b) and len(b) (zlib's crc32_combine): a's CRC shifted past b's bits, plus b's. For a
    bit-reflected 32-bit CRC with all-ones start and end (CRC-32, CRC-32C) of `polynomial`, bit-reflected too
    (`HashKind.crc_polynomial`)."""
    x_to_2_to_the = _x_to_2_to_the(polynomial)
    shift = 1 << 31  # x^0
    bits, power = length_b * 8, 0
    while bits:
        if bits & 1:
            shift = _multiply(x_to_2_to_the[power], shift, polynomial)
        bits >>= 1
        power += 1
    return _multiply(shift, crc_a, polynomial) ^ crc_b


@functools.cache
def _x_to_2_to_the(polynomial: int) -> tuple[int, ...]:
    """x^(2^k) modulo `polynomial`, k = 0..63: enough to shift a CRC past any length below 2^64 bits; made once."""
    powers = [1 << 30]  # x^1
    for _ in range(63):
        powers.append(_multiply(powers[-1], powers[-1], polynomial))
    return tuple(powers)


def _multiply(a: int, b: int, polynomial: int) -> int:
    """a * b modulo `polynomial`, both reflected 32-bit polynomials over GF(2)."""
    product = 0
    bit = 1 << 31
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ polynomial if b & 1 else b >> 1
    return product


def combined_crc(polynomial: int, ranges: dict[int, tuple[int, int]], size: int) -> str | None:
    """The CRC (of `polynomial`) of a file of `size` bytes from its ranges' CRCs (offset -> (length, crc)), in hex as
    the hashers write it; None unless the ranges tile the file exactly."""
    crc = position = 0
    for offset in sorted(ranges):
        length, range_crc = ranges[offset]
        if offset != position:
            return None
        crc, position = crc_combine(polynomial, crc, range_crc, length), position + length
    return f"{crc:08x}" if position == size else None


def kind_of(kinds: Mapping[str, HashKind], algorithm: str, where: str) -> HashKind:
    """The kind of `algorithm` among those its store declares; FetchError naming `where` (the file) if undeclared."""
    kind = kinds.get(algorithm)
    if kind is None:
        raise FetchError(f"{where}: vouched for by a {algorithm} checksum, a kind its store does not declare")
    return kind


class InOrderDigest:
    """A digest of a file whose ranges land in any order, from many threads: hashed from the start as far as landed
    ranges reach, read back (from the page cache) by each call's `read(offset, length)`, so the last range finds
    little left to hash. No thread waits for another here, but `hexdigest` for the one still hashing."""

    def __init__(self, hasher: Any, size: int) -> None:
        self._hasher = hasher
        self._size = size
        self._hashed = 0  # the bytes from the start that went through the hasher
        self._waiting: dict[int, int] = {}  # offset -> length of landed ranges past a gap, guarded by `_lock`
        self._lock = threading.Lock()
        self._hashing = threading.Lock()  # held by the one thread feeding the hasher

    def part_complete(self, offset: int, length: int, read: Callable[[int, int], bytes]) -> None:
        """The range's bytes are in the file: hash it, and whatever it joins up, unless another thread is at it."""
        with self._lock:
            self._waiting[offset] = length
        self._advance(read, wait=False)

    def hexdigest(self, read: Callable[[int, int], bytes]) -> str | None:
        """The whole file's digest, once every range has landed; None while a gap remains."""
        self._advance(read, wait=True)
        return str(self._hasher.hexdigest()) if self._hashed == self._size else None

    def _advance(self, read: Callable[[int, int], bytes], wait: bool) -> None:
        while self._hashing.acquire(blocking=wait):
            try:
                while (length := self._next()) is not None:
                    position, end = self._hashed, self._hashed + length
                    while position < end:
                        block = read(position, min(_BLOCK_BYTES, end - position))
                        if not block:
                            raise OSError(f"the file ended at byte {position} of {end}, while it was being hashed")
                        self._hasher.update(block)
                        position += len(block)
                    self._hashed = end
            finally:
                self._hashing.release()
            with self._lock:  # a range that landed while this thread was done but still held the turn
                if self._hashed not in self._waiting:
                    return

    def _next(self) -> int | None:
        with self._lock:
            return self._waiting.pop(self._hashed, None)


class FileVerifier:
    """What one file must hash to, and what its parts hashed to as they landed, from many threads.

    The file must hash to the listing's checksum, else to the first one the store vouched for as it read (before its
    first byte or, if it `vouches_late`, after its last: its parts are then hashed in that kind, for one pass). Parts
    feed the digests `part_digest` hands them, or are hashed in order, read back by the caller's `read(offset,
    length)`: the verifier holds no reference to its file, which holds it (a cycle would keep every file's objects
    alive until the cyclic collector ran: megabytes on a million small files). What none covered is hashed from the
    file when it is verified: all of a `resumed` file (one that keeps bytes an earlier run wrote)."""

    def __init__(
        self, file: RemoteFile, kinds: Mapping[str, HashKind], late: str | None, resumed: bool = False
    ) -> None:
        """`kinds`, `late`: its store's `Source.checksum_kinds` and `Source.vouches_late`."""
        self._file = file
        self._kinds = kinds
        self._late = late
        self._lock = threading.Lock()  # guards what is vouched for and the ranges' digests
        self.reset()
        self._resumed = resumed

    def reset(self) -> None:
        """Forget what responses vouched for and what was hashed: the file is fetched again, whole."""
        with self._lock:
            self._resumed = False
            self._expected: Checksum | None = self._file.checksum
            self._streamed: str | None = None  # the whole file's digest: in-stream (one part), or the ranges' in order
            self._range_crcs: dict[int, tuple[int, int]] = {}  # offset -> (length, CRC) of landed ranges
            self._in_order: InOrderDigest | None = None

    def expect(self, checksum: Checksum) -> None:
        """The store's word on the whole file: the first one stands, and a different one in the same algorithm
        means the file changed during the download (FetchError)."""
        with self._lock:
            expected = self._expected
            if expected is None:
                if self._late is not None and checksum.algorithm != self._late:
                    raise FetchError(
                        f"{self._file.locator}: vouched for by a {checksum.algorithm} checksum after its bytes were "
                        f"hashed in {self._late}, the kind its store says it vouches in (vouches_late)"
                    )
                self._expected = checksum
            elif expected.algorithm == checksum.algorithm and expected != checksum:
                evidence = f"{checksum.algorithm} {expected.hexdigest} became {checksum.hexdigest}"
                raise FetchError(changed_during_download(self._file.locator, evidence))

    def awaits_word(self) -> bool:
        """Whether the file is empty, nothing has vouched for it, and its store may as it reads it: it is read all
        the same, for that word, and verified by it as any other file."""
        return not self._file.size and self._expected is None and bool(self._kinds)

    def _kind(self) -> HashKind | None:
        """The kind the file must hash in: the one vouched for, else its store's late one; None: nothing to hash for."""
        expected = self._expected
        algorithm = expected.algorithm if expected is not None else self._late
        return None if algorithm is None else kind_of(self._kinds, algorithm, self._file.locator)

    def part_digest(self, length: int) -> Hasher | None:
        """The digest a part of `length` bytes feeds as they arrive: any, for the file in one part; a CRC whose ranges
        combine, for a range. None: nothing to check yet, a range hashed in order once landed, or of a resumed file."""
        size = self._file.size
        kind = self._kind()
        if kind is None or (self._resumed and length < size):
            return None
        if length == size:
            return kind.new(size)
        return kind.new(length) if kind.crc_polynomial else None

    def part_complete(self, offset: int, length: int, digest: Hasher | None, read: Callable[[int, int], bytes]) -> None:
        """A part is in the file, its bytes fed to `digest` (None: to none): keep what it hashed to, or hash it in
        order with the other ranges, read back by `read` (OSError when it cannot be)."""
        size = self._file.size
        if digest is None:
            if length < size and not self._resumed and (kind := self._kind()) is not None:
                with self._lock:
                    if self._in_order is None:
                        self._in_order = InOrderDigest(kind.new(size), size)
                    in_order = self._in_order
                in_order.part_complete(offset, length, read)
        elif length == size:
            self._streamed = digest.hexdigest()
        else:
            with self._lock:
                self._range_crcs[offset] = (length, int(digest.hexdigest(), 16))

    def finish_hashing(self, read: Callable[[int, int], bytes]) -> None:
        """Take the digest of the ranges hashed in order (the rest read back by `read`), waiting for a thread still at
        it: call it before what `read` reads through closes."""
        if self._in_order is not None:
            self._streamed = self._in_order.hexdigest(read)

    def verify(self, path: str) -> Checksum | None:
        """Check the complete file at `path` against what it must hash to, by the digests its parts fed or else by
        hashing it; the checksum it met (None: nothing was vouched for), or ChecksumMismatch."""
        expected, size = self._expected, self._file.size
        if expected is None:  # nothing vouched for: the size (and, for S3, If-Match on the ETag) is all there is
            return None
        kind = kind_of(self._kinds, expected.algorithm, self._file.locator)
        found = self._streamed
        if found is None and kind.crc_polynomial:
            found = combined_crc(kind.crc_polynomial, self._range_crcs, size)
        if found is None:  # a gap in the ranges hashed in order, or handed over whole: hash the file again
            found = file_hexdigest(path, kind.new(size))
        if found != expected.hexdigest:
            raise ChecksumMismatch(
                f"{self._file.locator}: {expected.algorithm} checksum mismatch (expected {expected.hexdigest}, "
                f"got {found}); the downloaded bytes are corrupt"
            )
        return expected


def file_hexdigest(path: str, hasher: Hasher) -> str:
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            hasher.update(block)
    return str(hasher.hexdigest())
