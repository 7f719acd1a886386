"""The contract every source fulfils: list what it has, and deliver any file, by ranges or whole.

Everything else (filtering, safe paths, parallelism, temporaries, verification, the manifest) is the
engine's, written once for all sources, in the spirit of rclone's one `Fs` interface. A source either
streams byte ranges into a sink (`read`: S3, the Hub), or makes files at paths the engine chooses
(`download_all`: the cache source, which cuts several shard parts from one pass over a data file).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from initializers.checksums import Checksum
from initializers.plan import RemoteFile

#: The size of the ranges a large file is fetched in, as AWS advises for parallel GETs; the Hub's CDN is alike.
PART_SIZE = 8 << 20


class Sink(Protocol):
    """Where a source writes the bytes of one range, in order."""

    @property
    def written(self) -> int:
        """Bytes accepted so far: a source resuming after a dropped connection starts at offset + written."""

    @property
    def needs_bytes(self) -> bool:
        """The sink checks what it is given (a digest): the bytes must come through memory, never a pipe."""

    def write(self, data: memoryview) -> None: ...

    def rewind(self) -> None:
        """Start the range over: a server ignored a resume request and sends it all again."""

    def write_from_pipe(self, pipe_fd: int, count: int) -> None:
        """Write the `count` bytes waiting in a pipe (spliced from a socket), without them passing through Python."""


class Source(ABC):
    #: True: the engine calls `read` for byte ranges; False: it calls `download_all` once per group of files.
    streams_ranges: bool = True
    #: Files larger than twice this are fetched as parallel ranges of this size; None: always in one range.
    part_size: int | None = None
    #: Parallel transfers at the start; more while more raise throughput (see `concurrency`).
    default_workers: int = 8
    #: The most parallel transfers when MAX_WORKERS is not set: enough to fill a link of capped connections.
    max_workers: int = 64
    #: A glob of top-level folders whose whole content the source defines (the cache source's shards): files
    #: there that the plan no longer lists are stale and get removed. None: files beside the plan are left alone.
    owned_folders: str | None = None

    @abstractmethod
    def list_files(self) -> Iterator[RemoteFile]:
        """Every file under the source root, with paths relative to it; raises FetchError when unreachable."""

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        """Write bytes [offset, offset + length) of `file` into `sink`; raise FetchError on failure."""
        raise NotImplementedError

    def checksum_at_rest(self, file: RemoteFile) -> Checksum | None:
        """A digest the whole stored file must hash to, for VERIFY: the one the listing vouches for."""
        return file.checksum

    def made_with(self, file: RemoteFile) -> str:
        """Files sharing this key are made in one go by `download_all` (the shard parts cut from one data file)."""
        return file.path

    def download_all(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None:
        """Leave each complete file of one group at its destination (on the same filesystem), reporting bytes
        as they are written."""
        raise NotImplementedError

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the manifest records about the source, free of secrets: its URI and, once `list_files` has run,
        the version it resolved to."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Unblock transfers waiting on the network, from another thread, when the run is being stopped."""

    def close(self) -> None:  # noqa: B027 - optional hook, most sources hold nothing
        """Release connections."""
