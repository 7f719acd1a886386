"""Where the bytes of one range of a stored file go (`PartSink`), and how the range is handed to its file's verifier
once all of it is in (`PartSink.landed`)."""

from __future__ import annotations

import contextlib

from initializers.common.clock import Clock
from initializers.common.errors import FetchError, disk_error
from initializers.common.remote_file import Checksum
from initializers.transfer.concurrency import RequestTimes
from initializers.transfer.file_transfer import Cancelled, FileTransfer
from initializers.transfer.progress import Progress

#: How often a range in flight records how far it got: a kill loses about this much of its transfer.
_RECORD_SECONDS = 1.0


class PartSink:
    """Writes one range at its offset through its file's transfer, through the digest the file's verifier hands it,
    and records how far it got; counts progress; notices cancellation. Made as its range's request is sent."""

    def __init__(self, transfer: FileTransfer, offset: int, length: int, progress: Progress, clock: Clock) -> None:
        self._transfer = transfer
        self._offset = offset
        self._length = length
        self._progress = progress
        self._clock = clock
        self.written = 0
        self.started = clock.monotonic()  # when its range's request was sent
        self.first_byte: float | None = None  # when the first byte arrived (clock.monotonic)
        self._recorded_at = 0.0  # when the record last heard how far this range got (clock.monotonic)
        self._digest = transfer.verifier.part_digest(length)

    def expect(self, checksum: Checksum) -> None:
        """Pass the whole file's checksum the store vouches for to the verifier; a part that had no digest to feed,
        and was fed nothing yet, may have one now."""
        verifier = self._transfer.verifier
        verifier.expect(checksum)
        if self._digest is None and self.written == 0:
            self._digest = verifier.part_digest(self._length)

    def part_complete(self) -> None:
        try:
            self._transfer.verifier.part_complete(self._offset, self._length, self._digest, self._transfer.read_back)
            self._record()
        except OSError as exc:  # reading it back to hash it in order, or recording it
            raise disk_error(exc, self._transfer.file.path) from None

    def landed(self, request_times: RequestTimes) -> None:
        """All of the range is in (else FetchError): hand it to the verifier, and record its request's times."""
        if self.written != self._length:
            raise FetchError(
                f"{self._transfer.file.locator}: received {self.written} bytes of range {self._offset}+{self._length}; "
                "the source ended early"
            )
        self.part_complete()
        if self.first_byte is not None:
            request_times.add(self.first_byte - self.started, self._clock.monotonic() - self.started)

    def _record(self) -> None:
        if self.written:
            self._transfer.recorded(self._offset, self.written)

    def write(self, data: memoryview) -> None:
        if self._transfer.cancelled:
            with contextlib.suppress(OSError):  # the run is stopping: what it wrote is kept for the next one
                self._record()
            raise Cancelled
        now = self._clock.monotonic()
        if self.first_byte is None:
            self.first_byte = self._recorded_at = now
        self._transfer.write(data, self._offset + self.written)
        if self._digest is not None:
            self._digest.update(data)
        self.written += len(data)
        self._progress.add_bytes(len(data))
        if now - self._recorded_at >= _RECORD_SECONDS:
            self._recorded_at = now
            try:
                self._record()
            except OSError as exc:
                raise disk_error(exc, self._transfer.file.path) from None

    def rewind(self) -> None:
        self._progress.add_bytes(-self.written)
        self._transfer.unwrite(self.written)
        self.written = 0
        self._digest = self._transfer.verifier.part_digest(self._length)
