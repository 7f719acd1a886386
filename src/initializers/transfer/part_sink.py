"""Where the bytes of one range of a stored file go (`PartSink`): written at their offset in the file's temporary,
through the digest its verifier hands them, with progress counted, a record of how far they got, and the run's
cancellation noticed; and the two moments around it: the temporary opened by the first range to run, and a range
handed to the verifier once all of it is in."""

from __future__ import annotations

import contextlib
import os
import threading

from initializers.common.clock import Clock
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum
from initializers.transfer.engine import Assembly, Cancelled, OpenFile, disk_error
from initializers.transfer.progress import Progress

#: How often a range in flight records how far it got: a kill loses about this much of its transfer.
_RECORD_SECONDS = 1.0


class PartSink:
    """Writes one range at its offset in the temporary, through the digest its file's verifier hands it, and records
    how far it got; counts progress; notices cancellation."""

    def __init__(
        self, target: OpenFile, offset: int, length: int, progress: Progress, cancel: threading.Event, clock: Clock
    ) -> None:
        self._target = target
        self._offset = offset
        self._length = length
        self._progress = progress
        self._cancel = cancel
        self._clock = clock
        self.written = 0
        self.first_byte: float | None = None  # when the first byte arrived (clock.monotonic)
        self._recorded_at = 0.0  # when the record last heard how far this range got (clock.monotonic)
        self._digest = target.verifier.part_digest(length)

    def vouch(self, checksum: Checksum) -> None:
        """Pass the whole file's checksum from the response, before its body, to the verifier; a part that had no
        digest to feed may have one now."""
        verifier = self._target.verifier
        verifier.vouch(checksum)
        if self._digest is None and self.written == 0:
            self._digest = verifier.part_digest(self._length)

    def landed(self) -> None:
        """The part is complete: hand it to the verifier, and record it."""
        try:
            self._target.verifier.landed(self._offset, self._length, self._digest, self._target.read_back)
            self._record()
        except OSError as exc:  # reading it back to hash it in order, or recording it
            raise disk_error(exc, self._target.file.path) from None

    def _record(self) -> None:
        """Record the bytes written so far (a file fetched in one part has no record)."""
        if self._target.record is not None and self.written:
            self._target.record.add(self._offset, self.written)

    def write(self, data: memoryview) -> None:
        if self._cancel.is_set():
            with contextlib.suppress(OSError):  # the run is stopping: what it wrote is kept for the next one
                self._record()
            raise Cancelled
        now = self._clock.monotonic()
        if self.first_byte is None:
            self.first_byte = self._recorded_at = now
        fd, position = self._target.fd, self._offset + self.written
        remaining = data
        try:
            with self._target.write_lock:
                while remaining:
                    count = os.pwrite(fd, remaining, position)
                    remaining, position = remaining[count:], position + count
                self._target.landed += len(data)
        except OSError as exc:  # a local disk failure: not the source's fault, never worth a retry
            raise disk_error(exc, self._target.file.path) from None
        if self._digest is not None:
            self._digest.update(data)
        self.written += len(data)
        self._progress.add_bytes(len(data))
        if now - self._recorded_at >= _RECORD_SECONDS:
            self._recorded_at = now
            try:
                self._record()
            except OSError as exc:
                raise disk_error(exc, self._target.file.path) from None

    def rewind(self) -> None:
        self._progress.add_bytes(-self.written)
        with self._target.write_lock:
            self._target.landed -= self.written
        self.written = 0
        self._digest = self._target.verifier.part_digest(self._length)


def open_once(assembly: Assembly, target: OpenFile, ranged: bool) -> None:
    """The first range of a file to run creates its temporary; the others find it open."""
    with target.lock:
        if target.fd >= 0:
            return
        assembly.opened(target)
        assembly.open_temp(target, target.file.size if ranged else None)


def range_landed(
    assembly: Assembly, target: OpenFile, sink: PartSink, offset: int, length: int, started: float
) -> None:
    """All of a range is in `sink` (FetchError when the source sent less): hand it to the verifier, and record its
    request's times (`started`: when it was sent)."""
    if sink.written != length:
        raise FetchError(
            f"{target.file.locator}: received {sink.written} bytes of range {offset}+{length}; the source ended early"
        )
    sink.landed()
    if sink.first_byte is not None:
        assembly.request_times.add(sink.first_byte - started, assembly.clock.monotonic() - started)
