"""Azure's MD5 of each range it sends, for blobs that have no Content-MD5 of their own (committed from blocks): asked
with `x-ms-range-get-content-md5: true` beside a Range of at most 4 MiB, Azure (and Azurite) answers with the
Content-MD5 of the bytes it sends. Each answer is hashed as it streams in, its last bytes held back until the hash
matches; a mismatch (bytes changed on the way: a proxy, a NIC, a bad cable) starts the range over under the one retry
policy. The hash is of what the service holds now: it vouches for the way, never for a stored copy gone bad (such a blob
is still recorded by its size and ETag). A range's CRC-64 (`x-ms-range-get-content-crc64`) is unused: Python has no
CRC-64 (its MD5 is C), and Azurite refuses the header (500), so it could be neither fast nor tested here.
"""

from __future__ import annotations

import hashlib

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, base64_digest
from initializers.sources.http.http1 import Response
from initializers.store.retry import Retriable
from initializers.store.sink import Sink

#: The largest range Azure sends an MD5 of; a larger one is refused (400).
MAX_HASHED_RANGE = 4 << 20
ASK_FOR_MD5 = "x-ms-range-get-content-md5"


def checked_of(kept: tuple[tuple[int, int], ...], size: int) -> tuple[tuple[int, int], ...]:
    """The kept intervals of a hashed blob whose every answer was checked: answers end every `MAX_HASHED_RANGE` bytes
    (or at the blob's end); bytes past the last such end came from an answer cut short (a kill, a crash), unchecked."""
    checked = []
    for offset, length in kept:
        end = offset + length
        if end < size:
            end -= end % MAX_HASHED_RANGE
        if end > offset:
            checked.append((offset, end - offset))
    return tuple(checked)


class HashedAnswer:
    """`sink`, through which one answer's `length` bytes pass hashed; `head` takes the MD5 Azure sent for them."""

    def __init__(self, sink: Sink, length: int, where: str) -> None:
        self._sink = sink
        self._length = length
        self._where = where
        self._hash = hashlib.md5(usedforsecurity=False)
        self._seen = 0
        self._expected: bytes | None = None

    def head(self, response: Response, start: int) -> None:
        """Take the answer's Content-MD5, which it must carry: it was asked for."""
        value = response.header("content-md5") or ""
        digest = base64_digest(value, 16)
        if digest is None:
            shown = repr(value[:40]) if value else "none"
            raise FetchError(
                f"{self._where}: bytes {start}-{start + self._length - 1} were asked for with their MD5 "
                f"({ASK_FOR_MD5}) and the answer's Content-MD5 is {shown}; the server does not offer it"
            )
        self._expected = digest

    @property
    def written(self) -> int:
        return self._sink.written

    def write(self, data: memoryview) -> None:
        self._hash.update(data)
        self._seen += len(data)
        if self._seen >= self._length and self._hash.digest() != self._expected:
            self._sink.rewind()  # whatever came before in this range is no longer trusted either
            self._hash, self._seen = hashlib.md5(usedforsecurity=False), 0
            raise Retriable(f"the bytes received for {self._where} do not match the MD5 Azure sent for them")
        self._sink.write(data)

    def expect(self, checksum: Checksum) -> None:
        self._sink.expect(checksum)

    def rewind(self) -> None:
        self._sink.rewind()
        self._hash, self._seen = hashlib.md5(usedforsecurity=False), 0
