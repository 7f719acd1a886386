"""One file's transfer, from its store to its final path, and the run's set of them.

A `FileTransfer` owns everything about one file on its way: its temporary and descriptor, what an earlier run kept
of it and the record of what lands, its verifier, the parts handed out, its checks and cancellation, and what is done
once it is in place (the journal, the progress). The tasks that move its bytes (`ranges`, `lane_files`, `making`)
only call it; whichever completes its last part finishes it.

`Transfers` makes them (resuming what an earlier run kept), knows those under way (the live view, a stop's message),
and fences them off once the run fails: from then on none opens a temporary or is renamed into place, and those left
are discarded, keeping the temporaries whose record lets a re-run resume them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from initializers.common import logs
from initializers.common.errors import FetchError, disk_error
from initializers.common.remote_file import RemoteFile
from initializers.destination.done import DoneFile
from initializers.destination.partials import PartRecord
from initializers.destination.temporaries import Temporaries
from initializers.store.contract import Source
from initializers.transfer.checksums import FileVerifier
from initializers.transfer.progress import InFlight

_log = logs.get_logger("initializers.transfer.engine")


class Cancelled(Exception):
    """Raised inside a transfer thread once another thread has failed or the run is being stopped."""


@dataclass(eq=False, slots=True, weakref_slot=True)
class FileTransfer:
    """One file from its store to its final path (see the module's docstring); made by `Transfers.start`."""

    file: RemoteFile
    temp: str
    _transfers: Transfers
    #: Intervals (offset, length) of the temporary an earlier run wrote, for this run to keep rather than fetch.
    kept: tuple[tuple[int, int], ...] = ()
    #: Times its complete bytes were checked: more than once when they missed its checksum and it was fetched again.
    checks: int = 0
    fd: int = -1
    record: PartRecord | None = None
    verifier: FileVerifier = field(init=False)
    #: Bytes of the file in its temporary (kept ones included), for the live view; writes add under `_write_lock`.
    landed: int = field(default=0, init=False)
    _cancelled: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # guards the opening and the parts handed out
    #: Writers of one file take turns here: the kernel serialises them on the inode's lock anyway, and its waiters
    #: spin, burning CPU that waiting on this lock does not.
    _write_lock: threading.Lock = field(default_factory=threading.Lock)
    _parts_pending: int = field(default=0, init=False)  # parts handed out and not yet done
    _all_handed_out: bool = field(default=False, init=False)  # the file's last part is among them

    def __post_init__(self) -> None:
        self.verifier = FileVerifier(self.file, *self._transfers.vouching, resumed=bool(self.kept))
        self.landed = sum(length for _offset, length in self.kept)

    # Its parts.

    def handed_out(self, last: bool) -> None:
        """One more part is handed out; `last`: the file's last."""
        with self._lock:
            self._parts_pending += 1
            self._all_handed_out = last

    def part_done(self) -> bool:
        """A part handed out is done; True when it completes the file."""
        with self._lock:
            self._parts_pending -= 1
            return self._parts_pending == 0 and self._all_handed_out

    @property
    def cancelled(self) -> bool:
        """Whether its transfer is to stop: it was cancelled, or the run failed or is being stopped."""
        return self._cancelled or self._transfers.cancel.is_set()

    def cancel(self) -> None:
        """Stop this file's transfer at its next write."""
        self._cancelled = True

    # Its temporary.

    def open(self, ranged: bool) -> None:
        """Create its temporary once, whichever part runs first (`ranged`: at offsets, with a record of what lands)."""
        if self.fd >= 0:
            return
        with self._lock:
            if self.fd >= 0:
                return
            self._transfers.admit(self)
            self._open_temp(self.file.size if ranged else None)

    def begin_made(self) -> None:
        """Its maker writes the temporary itself: a failure of the run removes whatever it left there."""
        self._transfers.admit(self)

    def start_over(self) -> None:
        """Keep nothing an earlier run or attempt wrote: the file is fetched whole, and checked from scratch."""
        self.keep_only(())

    def keep_only(self, kept: tuple[tuple[int, int], ...]) -> None:
        """Keep only `kept` of what an earlier run wrote (`Storage.resumable`); the rest is fetched again."""
        self.kept = kept
        self.landed = sum(length for _offset, length in kept)
        if not kept:
            self.verifier.reset()

    def fetch_again(self) -> None:
        """Its bytes missed its checksum: start over in a new temporary, to be fetched whole, in one part."""
        _log.warning("checksum mismatch, fetching the file again", path=self.file.path)
        self._transfers.on_refetch(self.file.size)
        self.start_over()
        self._open_temp(self.file.size)

    def _open_temp(self, size: int | None) -> None:
        keep = bool(self.kept)
        self.fd = self._transfers.temps.open(self.temp, size, keep)
        if size is not None:
            self.record = self._transfers.temps.record(self.temp, self.file, keep)

    def write(self, data: memoryview, position: int) -> None:
        """Write `data` at `position` of the temporary (a local disk failure: FetchError, never worth a retry)."""
        remaining = data
        try:
            with self._write_lock:
                while remaining:
                    count = os.pwrite(self.fd, remaining, position)
                    remaining, position = remaining[count:], position + count
                self.landed += len(data)
        except OSError as exc:
            raise disk_error(exc, self.file.path) from None

    def unwrite(self, count: int) -> None:
        """`count` bytes written are to be written again (a range started over): no longer counted as landed."""
        with self._write_lock:
            self.landed -= count

    def recorded(self, offset: int, length: int) -> None:
        """Note that bytes [offset, offset + length) landed, for a re-run to keep (a file in one part has no record)."""
        if self.record is not None:
            self.record.add(offset, length)

    def read_back(self, offset: int, length: int) -> bytes:
        """Bytes of the temporary, for the verifier to hash ranges in order (from the page cache)."""
        return os.pread(self.fd, length, offset)

    def close(self) -> None:
        if self.record is not None:
            self.record.close()
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    # Its end.

    def finish(self) -> None:
        """Check the file's size, then its checksum (else ChecksumMismatch), rename it into place and record it done."""
        self.checks += 1
        # Before the descriptor closes: a thread may still be reading through it.
        self.verifier.finish_hashing(self.read_back)
        self.close()
        # Size and mtime survive the rename: one stat serves the checks and the journal.
        st = os.stat(self.temp, follow_symlinks=False)
        if self.file.exact_size and st.st_size != self.file.size:
            raise FetchError(f"{self.file.locator}: got {st.st_size} bytes, the source listed {self.file.size}")
        verified = self.verifier.verify(self.temp)
        self._transfers.place(self)
        done = DoneFile(self.file.path, st.st_size, self.file.version, st.st_mtime_ns)
        if verified is not None:
            done = done._replace(algorithm=verified.algorithm, hexdigest=verified.hexdigest)
        self._transfers.on_done(self, done)

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """A part of its work: what it raises (but a cancellation) fails this file, and cancels its other parts."""
        try:
            yield
        except Cancelled:
            raise
        except BaseException:
            self.cancel()
            raise

    def failed(self) -> None:
        """The run ends with this file unfinished: close its temporary, and remove it unless its record lets a re-run
        resume it."""
        with contextlib.suppress(OSError):
            self.close()
        if self.record is None:
            self._transfers.temps.remove(self.temp)


class Transfers:
    """The run's file transfers: made here, known while under way, fenced off once the run fails."""

    def __init__(
        self, temps: Temporaries, cancel: threading.Event, on_done: Callable[[FileTransfer, DoneFile], None],
        on_refetch: Callable[[int], None], store: type[Source],
    ) -> None:  # fmt: skip
        """`cancel`: set once the run fails or is being stopped; `on_done`: what follows a file in place (the journal,
        the progress); `on_refetch`: landed bytes to fetch again; `store`: the source's class, by its checksum kinds."""
        self.temps = temps
        self.vouching = (store.checksum_kinds, store.vouches_late)
        self.cancel = cancel
        self.on_done = on_done
        self.on_refetch = on_refetch
        #: Transfers with a temporary, guarded by `_changes`; once `_fenced`, none is opened or renamed into place.
        self._open: dict[str, FileTransfer] = {}
        self._changes = threading.Condition()
        self._renaming = 0
        self._fenced = False

    def start(self, file: RemoteFile) -> FileTransfer:
        """The transfer of `file` (nothing created yet), keeping an earlier run's partial of it of this version."""
        temp = self.temps.path(file.path)
        partial = self.temps.partial(temp)
        if partial is None:
            return FileTransfer(file, temp, self)
        if partial.of(file):
            return FileTransfer(file, temp, self, partial.kept)
        _log.info("the source changed since the partial download: starting the file over", path=file.path,
                  was_version=partial.version, version=file.version, was_size=partial.size, size=file.size)  # fmt: skip
        return FileTransfer(file, temp, self)

    def in_flight(self) -> list[InFlight]:
        """The files being written right now, by path, and how much of each has landed."""
        with self._changes:
            return [InFlight(path, each.file.size, each.landed) for path, each in sorted(self._open.items())]

    def admit(self, transfer: FileTransfer) -> None:
        """`transfer`'s temporary is about to be written; Cancelled once the run is fenced off (a thread that outlived
        the stop's grace: its temporary would outlive the cleanup)."""
        with self._changes:
            if self._fenced:
                raise Cancelled
            self._open[transfer.file.path] = transfer

    def place(self, transfer: FileTransfer) -> None:
        """Rename `transfer`'s temporary into place, which the fence waits for; Cancelled once the run is fenced off."""
        with self._changes:
            if self._fenced:
                raise Cancelled
            self._renaming += 1
        try:
            self.temps.place(transfer.temp, transfer.file.path, recorded=transfer.record is not None)
        finally:
            with self._changes:
                self._renaming -= 1
                self._changes.notify_all()
        with self._changes:
            self._open.pop(transfer.file.path, None)

    def discard_unfinished(self) -> None:
        """Fence the run off (renames under way are waited for), and end every transfer left unfinished."""
        with self._changes:
            self._fenced = True
            self._changes.wait_for(lambda: self._renaming == 0)
            unfinished = list(self._open.values())
            self._open.clear()
        for transfer in unfinished:
            transfer.failed()
