"""The contracts sources fulfil: list what they have, then deliver it.

A `Storage` (S3, the Hub) holds files and reads any byte range of one into a sink, in the spirit of rclone's
one `Fs` interface. A `Maker` (the cache source) makes the files it lists, several in one go (the shard parts
cut from one pass over a data file), at paths it is given. Everything else (filtering, safe paths, parallelism,
temporaries, verification, the manifest) is written once, against these contracts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

from initializers.common.remote_file import RemoteFile
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp, RoundTrips
from initializers.transfer.engine import TaskFactory
from initializers.transfer.making import MadeGroups
from initializers.transfer.range_sizes import PART_SIZE
from initializers.transfer.ranges import LaneReads, StoredRanges
from initializers.transfer.sink import Sink
from initializers.transfer.throttle import Throttle


class Source(ABC):
    """What every source offers a run: a listing, a description for the manifest, and a way to be stopped."""

    #: Parallel transfers at the start; more while more raise throughput (see `concurrency`).
    default_workers: int = 8
    #: The most parallel transfers when MAX_WORKERS is not set: enough to fill a link of capped connections, and as
    #: many small-file requests as do well before more threads cost more CPU than the round trips they hide.
    max_workers: int = 64
    #: The most small-file requests at once when MAX_WORKERS is not set (None: `max_workers`): over a long round trip
    #: each waits on the network, not the CPU, and only more of them in flight raise throughput (see `concurrency`).
    max_requests: int | None = None
    #: A glob of top-level folders whose whole content the source defines (the cache source's shards): files
    #: there that the plan no longer lists are stale and get removed. None: files beside the plan are left alone.
    owned_folders: str | None = None
    #: The pause its requests share while its server throttles them, which the concurrency ramp follows (None: the
    #: source reads through a library that paces itself, as pyarrow does).
    throttle: Throttle | None = None
    #: The round trips its requests have shown, which the concurrency ramp starts small-file requests from (None: the
    #: source measures none).
    round_trips: RoundTrips | None = None

    @abstractmethod
    def list_files(self) -> Iterator[RemoteFile]:
        """Every file under the source root, with paths relative to it; raises FetchError when unreachable."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the manifest records about the source, free of secrets: its URI and, once `list_files` has run,
        the version it resolved to."""

    @abstractmethod
    def task_factory(self, ramp: Ramp, bandwidth: TokenBucket | None) -> TaskFactory:
        """What the engine's tasks are for this kind of source; `bandwidth`: the MAX_BANDWIDTH cap, if any."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Unblock transfers waiting on the network, from another thread, when the run is being stopped."""

    def close(self) -> None:  # noqa: B027 - optional hook, most sources hold nothing
        """Release connections."""


class Storage(Source):
    """Files stored as they are, read by byte ranges (S3, the Hub)."""

    max_requests = 256  # as many as s5cmd runs by default
    #: How small files are read in the lane, many requests kept in flight by one thread; None: the source reads each
    #: file in a thread of its own.
    lane_reads: LaneReads | None = None

    def task_factory(self, ramp: Ramp, bandwidth: TokenBucket | None) -> TaskFactory:
        """Ranges of the stored files, under the MAX_BANDWIDTH cap."""
        return StoredRanges(self, ramp, bandwidth)

    def part_size_for(self, file: RemoteFile) -> int | None:
        """The smallest range `file` is fetched in (connections measured fast get larger ones); a file of up to two
        ranges comes whole. None: `file` comes whole, whatever its size."""
        return PART_SIZE

    @abstractmethod
    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        """Write bytes [offset, offset + length) of `file` into `sink`; raise FetchError on failure."""


class Maker(Source):
    """Files made rather than copied (shard parts cut from a table's data files), several in one go."""

    def task_factory(self, ramp: Ramp, bandwidth: TokenBucket | None) -> TaskFactory:
        """Groups of made files; the cap does not apply (the cache source refuses MAX_BANDWIDTH)."""
        return MadeGroups(self)

    @abstractmethod
    def made_with(self, file: RemoteFile) -> str:
        """Files sharing this key are made together by one `make` (the shard parts cut from one data file)."""

    @abstractmethod
    def make(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None:
        """Leave each complete file of one group at its destination (on the same filesystem), reporting bytes
        as they are written."""
