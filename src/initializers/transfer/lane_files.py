"""Small files through the lane (`lane`): which files take it (`for_lane`), a batch of them handed to it as one task,
and what the lane does with each (`SmallFileWork`): one request for all of it, finished as a range's last part would
be."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from initializers.common import logs
from initializers.common.remote_file import RemoteFile
from initializers.store.contract import PART_SIZE, Storage
from initializers.store.lane import RequestInFlight
from initializers.store.retry import THROTTLE_BUDGET_SECONDS, TRANSIENT, Retriable
from initializers.store.round_trips import RoundTrips
from initializers.store.sink import Sink
from initializers.store.throttle import Throttle
from initializers.transfer.engine import Task, TransferContext
from initializers.transfer.file_transfer import FileTransfer
from initializers.transfer.lane import Lane
from initializers.transfer.part_sink import PartSink

_log = logs.get_logger("initializers.transfer.engine")

#: Whole files this small take the lane once round trips are short: their requests, not their bytes, cost the CPU.
LANE_MOST_BYTES = 256 << 10
#: The longest round trip the lane is used at (an object store in the cluster, or on the node): it opens its
#: connections one at a time, which costs microseconds there but would hold up every request in flight over a long
#: one, where threads open theirs at once (and the network, not the CPU, sets the pace).
LANE_ROUND_TRIP_SECONDS = 0.002
#: Files handed to the lane by one task.
LANE_BATCH = 64
#: Throttled answers a file in the lane is asked again for in the lane, as the fleet's hold lets it; past them it goes
#: the threads' way, under the retry policy's budget (throttling that long holds the whole lane anyway).
_LANE_THROTTLED_TIMES = 8


def for_lane(file: RemoteFile, round_trips: RoundTrips | None) -> bool:
    """Whether `file` takes the lane: a small file, once the round trips measured are short."""
    shortest = round_trips.shortest if round_trips is not None else None
    return 0 < file.size <= LANE_MOST_BYTES and shortest is not None and shortest <= LANE_ROUND_TRIP_SECONDS


def lane_task(lane: Lane[LaneFile], batch: list[LaneFile]) -> Task:
    """Handing a batch to the lane, counted as a part's work: a few threads keep the lane fed, its requests in flight
    are its own (`Ramp.requests`), and threads beyond those would only wait."""
    return Task(PART_SIZE, partial(lane.take, batch))


@dataclass
class LaneFile:
    """A small file in the lane: its transfer, and once its request is sent, the sink it is read into."""

    transfer: FileTransfer
    sink: PartSink | None = None
    throttled: int = 0  # its requests throttled so far


class SmallFileWork:
    """What the lane does with each small file (`lane.LaneWork`), as the module's docstring says."""

    def __init__(
        self,
        reader: Storage,
        begin: Callable[[RemoteFile, Sink], RequestInFlight],
        context: TransferContext,
        throttle: Throttle | None,
        part_done: Callable[[FileTransfer], None],
    ) -> None:
        """`begin`: the source's lane request (`LaneReads.begin`); `reader`: how a failed one is asked again;
        `part_done`: what a range's thread does once its part is in (the file finished after its last)."""
        self._reader = reader
        self._begin = begin
        self._context = context
        self._throttle = throttle
        self._part_done = part_done

    def start(self, item: LaneFile) -> RequestInFlight:
        if self._throttle is not None:
            # The fleet's hold keeps the lane's requests back too. One longer than a request may wait is not waited
            # out: the request goes, and its answer fails it under the retry policy.
            self._throttle.wait_turn(THROTTLE_BUDGET_SECONDS)
        context, transfer = self._context, item.transfer
        with transfer.working():
            transfer.open(ranged=False)
        item.sink = PartSink(transfer, 0, transfer.file.size, context.progress, context.clock)
        return self._begin(transfer.file, item.sink)

    def done(self, item: LaneFile, request: RequestInFlight) -> None:
        sink, size = item.sink, item.transfer.file.size
        assert sink is not None, "started"
        if sink.written != size:
            self.failed(item, ConnectionError(f"the body ended {size - sink.written} bytes early"))
            return
        if self._throttle is not None:
            self._throttle.answered(sink.started)  # a probe of the fleet's hold, if sent during one: it ends the hold
        self._landed(item, sink)

    def failed(self, item: LaneFile, error: Exception) -> bool:
        """A throttled request goes back to the lane (True) once the fleet's hold lets it, `_LANE_THROTTLED_TIMES` at
        most: retried here, in the lane's thread, it would hold every other request of the lane for as long as the
        throttling lasts, and one at a time after. Other failures, and throttling beyond that, are asked again the
        threads' way, under the retry policy, for the rest of the file: one persisting fails the run, as a thread's."""
        with item.transfer.working():
            sink, file = item.sink, item.transfer.file
            if not isinstance(error, TRANSIENT) or item.transfer.cancelled or sink is None:
                raise error  # final (a refused answer, the disk's failure, a stop), or its temporary did not open
            if isinstance(error, Retriable) and error.throttled and self._throttle is not None:
                self._throttle.throttled(error.retry_after, sink.started)  # the fleet is held, the lane's width halved
                item.throttled += 1
                if item.throttled <= _LANE_THROTTLED_TIMES and sink.written == 0:
                    return True
            _log.debug("a request in the lane failed: asking again", path=file.path, error=str(error))
            self._reader.read(file, 0, file.size, sink)
            self._landed(item, sink)
            return False

    def _landed(self, item: LaneFile, sink: PartSink) -> None:
        with item.transfer.working():
            sink.landed(self._context.request_times)
            self._part_done(item.transfer)
