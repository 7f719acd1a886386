"""How many transfers run at once: start modest, double while doubling pays, never above the cap.

On a real network each connection is capped (S3 and the Hub's CDN serve tens of MB/s per request) and
every request pays a round trip, so throughput grows with connections until the link, the server or
our CPU is the limit; on loopback our CPU is the limit from the start. Neither count can be known in
advance, so the engine measures: every window it reports the bytes delivered and the CPU the process
used, and the ramp answers with the number of streams for the next window.

A stream is a part's worth of bytes. Tasks smaller than that (small files) are bound by round trips, not
bytes: as many more of them run at once as would move a part's bytes together, up to the cap. Many requests
in flight also cost a server less per request, loopback included.

The ramp also sizes the ranges of large files from the rate one connection achieved: capped connections get
`PART_SIZE` ranges, so a file spreads over many of them; fast ones get larger ranges, up to `MAX_PART_SIZE`,
so that fewer requests carry the same bytes (less CPU for us and for the server).
"""

from __future__ import annotations

from dataclasses import dataclass

from initializers.sources.base import PART_SIZE

#: Seconds between decisions: long enough to average many requests, short enough to ramp within a second.
WINDOW_SECONDS = 0.25
#: A doubling is kept only when throughput rose at least this much: less is noise, or a limit elsewhere, and
#: fewer connections do as well for less.
_WORTH_KEEPING = 1.15
#: Share of one core above which the process is the limit: more threads would only contend for it.
_BUSY_CPU = 0.5
#: After settling, another doubling is tried every this many windows, in case the regime changed (small files
#: following large ones, a listing that caught up).
_PROBE_EVERY = 8
#: Tasks the running mean of task sizes mostly reflects: enough to smooth a mix, few enough to follow a change
#: (small files listed first, a large file's ranges next).
_TASK_HORIZON = 16
#: The largest range a fast connection gets: a file of a few hundred MB still spreads over several streams.
MAX_PART_SIZE = 32 << 20
#: A range lasts about this long at the rate one connection achieved: long against a request's round trip and its
#: fixed cost, short enough that a file's last ranges keep few streams waiting.
_PART_SECONDS = 0.25


@dataclass
class Ramp:
    """The limit for each window, from the throughput and CPU share measured in the one before."""

    limit: int  # streams
    cap: int  # transfers
    _trial: tuple[int, float] | None = None  # (limit, throughput) before the doubling being tried
    _windows_to_probe: int = 1
    _task_bytes: float = PART_SIZE  # running mean of the sizes of the tasks started
    part_size: int = PART_SIZE  # the range size a connection's measured rate calls for, in whole MiB

    def __post_init__(self) -> None:
        self.limit = max(1, min(self.limit, self.cap))

    @property
    def workers(self) -> int:
        """Transfers to run at once: `limit` streams, each as many tasks as move a part's bytes together."""
        return min(self.cap, self.limit * max(1, round(PART_SIZE / max(self._task_bytes, 1.0))))

    def task_started(self, size: int) -> None:
        """A task of `size` bytes was handed to a transfer: it moves the running mean that sizes `workers`."""
        self._task_bytes += (size - self._task_bytes) / _TASK_HORIZON

    def observe(self, throughput: float, cpu_share: float) -> int:
        """Throughput (bytes per second) and CPU share (cores) of the window just ended; returns the new limit."""
        if throughput > 0:  # a window with nothing delivered (a listing, the first bytes) says nothing of the rate
            per_transfer = int(throughput / self.workers * _PART_SECONDS)
            self.part_size = min(MAX_PART_SIZE, max(PART_SIZE, per_transfer >> 20 << 20))
        if self._trial is not None:
            limit_before, throughput_before = self._trial
            self._trial = None
            if throughput >= throughput_before * _WORTH_KEEPING:
                return self._double(throughput, cpu_share)
            self.limit = limit_before
            self._windows_to_probe = _PROBE_EVERY
            return self.limit
        self._windows_to_probe -= 1
        if self._windows_to_probe <= 0:
            return self._double(throughput, cpu_share)
        return self.limit

    def _double(self, throughput: float, cpu_share: float) -> int:
        if self.limit >= self.cap or cpu_share >= _BUSY_CPU or throughput <= 0:
            self._windows_to_probe = _PROBE_EVERY
            return self.limit
        self._trial = (self.limit, throughput)
        self.limit = min(self.limit * 2, self.cap)
        return self.limit


def range_size(advised: int | None, ramp: Ramp) -> int | None:
    """The size of the next range of a large file: the storage's advised size, grown to what one connection's
    measured rate calls for (`Ramp.part_size`); None: the storage takes whole files only.

    Asked per file and per range: connections speed up, and a source may learn late whether its server takes ranges.
    """
    return max(advised, ramp.part_size) if advised else None


def comes_whole(size: int, part: int | None) -> bool:
    """A file of up to two parts comes in one request: splitting it would save at most one part's time and lose the
    check of its checksum as it streams in."""
    return not part or size <= 2 * part
