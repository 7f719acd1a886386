"""Where a source writes the bytes it reads: the one interface between a source's reads and the transfer."""

from __future__ import annotations

from typing import Protocol

from initializers.common.remote_file import Checksum


class Sink(Protocol):
    """Where a source writes the bytes of one range, in order."""

    @property
    def written(self) -> int:
        """Bytes accepted so far: a source resuming after a dropped connection starts at offset + written."""

    def write(self, data: memoryview) -> None: ...

    def expect(self, checksum: Checksum) -> None:
        """What the whole file hashes to, as the store says while reading this range: before its first byte, or, by a
        store that `vouches_late`, once its last byte is written."""

    def rewind(self) -> None:
        """Start the range over: a server ignored a resume request and sends it all again."""
