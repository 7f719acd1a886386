"""The contracts sources fulfil: list what they have, then deliver it.

A `Storage` (a bucket, a container, a repository) holds files and reads any byte range of one into a sink, in
the spirit of rclone's one `Fs` interface. A `Maker` (the cache source) makes the files it lists, several in one go
(the shard parts cut from one pass over a data file), at paths it is given. Everything else (filtering, safe paths,
parallelism, temporaries, verification, the manifest) is written once, against these contracts: the engine picks how
to move a source's files by which of the two it is (`transfer.factories`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from initializers.common.remote_file import RemoteFile
from initializers.store.hashers import HashKind, kinds
from initializers.store.lane import LaneReads
from initializers.store.round_trips import RoundTrips
from initializers.store.sink import Sink
from initializers.store.throttle import Throttle

#: Intervals (offset, length) of a file, in order.
Intervals = tuple[tuple[int, int], ...]

#: The size of the ranges a large file is fetched in over capped connections, as AWS advises for parallel GETs (the
#: Hub's CDN is alike): what a `Storage` advises unless it knows better; the engine grows it on fast connections.
PART_SIZE = 8 << 20

#: The most small-file requests at once a `Storage` advises without MAX_WORKERS: as many as s5cmd runs by default.
MAX_REQUESTS = 256

#: Pages in a row without an entry before a paginated listing is taken to go nowhere, for every store: a page may be
#: empty yet go on (past many deleted keys, or holding only folders), but not without end.
MAX_EMPTY_PAGES = 100


def comes_whole(size: int, part: int | None) -> bool:
    """A file of up to two parts comes in one request: splitting it would save at most one part's time and lose the
    check of its checksum as it streams in."""
    return not part or size <= 2 * part


@dataclass(frozen=True)
class Advice:
    """What a store advises the engine that moves its files, read by it in one place (`transfer.factories`)."""

    #: Parallel transfers at the start; more while more raise throughput (see `concurrency`).
    workers: int = 8
    #: The most parallel transfers when MAX_WORKERS is not set: enough to fill a link of capped connections, and as
    #: many small-file requests as do well before more threads cost more CPU than the round trips they hide.
    max_workers: int = 64
    #: The most small-file requests at once when MAX_WORKERS is not set (None: `max_workers`): over a long round trip
    #: each waits on the network, not the CPU, and only more of them in flight raise throughput (see `concurrency`).
    max_requests: int | None = None
    #: The pause its requests share while its server throttles them, which the concurrency ramp follows (None: the
    #: store reads through a library that paces itself, as pyarrow does).
    throttle: Throttle | None = None
    #: The round trips its requests have shown, which the concurrency ramp starts small-file requests from (None: none).
    round_trips: RoundTrips | None = None
    #: How a `Storage` reads small files in the lane, many requests kept in flight by one thread; None: each file is
    #: read in a thread of its own.
    lane: LaneReads | None = None


class Source(ABC):
    """What every source offers a run: a listing, a description for the manifest, and a way to be stopped."""

    #: A glob of top-level folders whose whole content the source defines (the cache source's shards): files
    #: there that the plan no longer lists are stale and get removed. None: files beside the plan are left alone.
    owned_folders: str | None = None

    # What the store offers, declared by its class and held to by the conformance suite (`tests/test_conformance.py`);
    # whether it reads byte ranges or makes its files is what it is: a `Storage` or a `Maker`.

    #: A run reads one version of the source whatever changes meanwhile (a commit, a table's snapshot); False: a file
    #: changed during the run fails it rather than land mixed (If-Match on the listed version).
    pins_versions: ClassVar[bool] = False
    #: The kinds of checksum it vouches for files with (in its listing or as it reads them), by name, each with how it
    #: is computed (`store.hashers`): the engine verifies each file by these alone; empty: by size and version.
    checksum_kinds: ClassVar[Mapping[str, HashKind]] = kinds()
    #: The kind it vouches in only once a file's bytes are read (a trailer, a digest it computes as it reads:
    #: `Sink.expect` after the last byte), which the engine then hashes every byte in as it lands, for one pass.
    vouches_late: ClassVar[str | None] = None

    @abstractmethod
    def list_files(self) -> Iterator[RemoteFile]:
        """Every file under the source root, with paths relative to it; raises FetchError when unreachable."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the manifest records about the source, free of secrets: its URI and, once listed, its version."""

    def advice(self) -> Advice:
        """What the store advises the engine: the defaults, unless it knows better."""
        return Advice()

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Unblock transfers waiting on the network, from another thread, when the run is being stopped."""

    def close(self) -> None:  # noqa: B027 - optional hook, most sources hold nothing
        """Release connections."""


class Storage(Source):
    """Files stored as they are, read by byte ranges."""

    def advice(self) -> Advice:
        return Advice(max_requests=MAX_REQUESTS)

    def resumable(self, file: RemoteFile, kept: Intervals) -> Intervals:
        """Of the intervals (offset, length) of `file` an earlier run kept, those this run may build on: all of them,
        since the file's checksum, or its size and version, is checked once it is whole. A store that checks bytes
        only as they arrive keeps those it checked."""
        return kept

    def part_size_for(self, file: RemoteFile) -> int | None:
        """The smallest range `file` is fetched in (connections measured fast get larger ones); a file of up to two
        ranges comes whole. None: `file` comes whole, whatever its size."""
        return PART_SIZE

    @abstractmethod
    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        """Write bytes [offset, offset + length) of `file` into `sink`; raise FetchError on failure."""


class Maker(Source):
    """Files made rather than copied (shard parts cut from a table's data files), several in one go."""

    @abstractmethod
    def made_with(self, file: RemoteFile) -> str:
        """Files sharing this key are made together by one `make` (the shard parts cut from one data file)."""

    @abstractmethod
    def make(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None:
        """Leave each complete file of one group at its destination (same filesystem), reporting bytes as written."""
