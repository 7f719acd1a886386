"""What a store offers the lane (many small-file requests kept in flight by one thread): a request that can be sent
without waiting (`LaneReads.begin`) and its answer read as it arrives (`RequestInFlight`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from initializers.common.remote_file import RemoteFile
from initializers.store.sink import Sink


class RequestInFlight(Protocol):
    """One request in flight on a connection of its own."""

    def fileno(self) -> int:
        """What a selector watches for its answer."""

    def advance(self) -> bool:
        """Read what arrived of the answer into its sink, without waiting; True once all is in; raises its failure."""

    def abandon(self) -> None:
        """Drop the connection: the request failed, or the run is stopping."""


class LaneReads(NamedTuple):
    """How a source reads small files in the lane: `begin(file, sink)` asks for all of `file` and returns the request
    in flight, its answer to be read into `sink` without waiting; `timeout`: seconds an answer may go without a byte."""

    begin: Callable[[RemoteFile, Sink], RequestInFlight]
    timeout: float
