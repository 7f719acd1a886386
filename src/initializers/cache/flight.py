"""The Arrow Flight service of `cache-server`: Kubeflow's data-cache protocol over a materialised table.

`get_flight_info(FlightDescriptor.for_path(str(index), str(total)))` answers partition `index` of `total`: rows [start,
stop) in table order (`shards`), cut by `sharding.shard_range`, so every split covers each row once, contiguously, with
sizes within one row; with `total` equal to the data nodes, partition i is `shard-i`. Its one endpoint carries an opaque
ticket for that partition and the advertised location; `do_get(ticket)` streams the rows, data columns only, a batch at
a time. A bad descriptor or ticket gets a Flight error naming what is wrong; the server goes on serving.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from initializers.cache.sharding import shard_range
from initializers.cache.shards import MaterialisedTable

_DIGITS = re.compile(r"[0-9]+")


def partition_of(path: list[bytes]) -> tuple[int, int]:
    """(index, total) from a descriptor's path of two decimal integers; a ValueError saying what is wrong."""
    if len(path) != 2:
        raise ValueError(f"expected a path of two integers, the partition index and total, got {len(path)} parts")
    for name, raw in zip(("index", "total"), path, strict=True):
        text = raw.decode("utf-8", "replace")
        if not _DIGITS.fullmatch(text):
            raise ValueError(f"the partition {name} must be an integer, 0 or more; got {text!r}")
    index, total = map(int, path)
    if total == 0:
        raise ValueError("the partition total must be at least 1, got 0")
    if index >= total:
        raise ValueError(f"partition index {index} is out of range: {total} partitions are numbered 0 to {total - 1}")
    return index, total


def partition_of_ticket(ticket: bytes) -> tuple[int, int]:
    """The partition a ticket of ours names; a ValueError for anything else."""
    try:
        index, total = json.loads(ticket)["partition"]
        return partition_of([str(index).encode(), str(total).encode()])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"not a ticket this server issued: {ticket[:80]!r}") from None


class CacheFlightServer(flight.FlightServerBase):
    """Listening from construction (pyarrow's servers start at once); `stop` ends it within a grace period."""

    def __init__(self, table: MaterialisedTable, bind: str, port: int, advertised: str, log: Any) -> None:
        super().__init__(location=f"grpc://{_host(bind)}:{port}")
        self.table = table
        self.location = flight.Location(f"grpc://{_host(advertised)}:{self.port}")
        self._log = log
        self._stopping = threading.Event()

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        index, total = self._partition(descriptor)
        start, stop = shard_range(self.table.rows, total, index)
        endpoint = flight.FlightEndpoint(json.dumps({"partition": [index, total]}).encode(), [self.location])
        return flight.FlightInfo(self.table.schema, descriptor, [endpoint], stop - start, -1)

    def get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        self._partition(descriptor)
        return flight.SchemaResult(self.table.schema)

    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        try:
            index, total = partition_of_ticket(ticket.ticket)
        except ValueError as exc:
            self._log.warning("refused", error=str(exc), peer=context.peer())
            raise flight.FlightServerError(str(exc)) from None
        start, stop = shard_range(self.table.rows, total, index)
        return flight.GeneratorStream(self.table.schema, self._stream(context, index, total, start, stop))

    def stop(self, grace: float) -> bool:
        """End the open streams at their next batch and shut down; False when some did not end within `grace`
        seconds (a reader that stopped reading), which the caller leaves to the process's exit."""
        self._stopping.set()
        shutting = threading.Thread(target=self.shutdown, name="flight-shutdown", daemon=True)
        shutting.start()
        shutting.join(grace)
        return not shutting.is_alive()

    def _partition(self, descriptor: flight.FlightDescriptor) -> tuple[int, int]:
        try:
            if descriptor.descriptor_type != flight.DescriptorType.PATH:
                raise ValueError("expected a path descriptor, FlightDescriptor.for_path(str(index), str(total))")
            return partition_of(descriptor.path)
        except ValueError as exc:
            self._log.warning("refused", error=str(exc))
            raise flight.FlightServerError(str(exc)) from None

    def _stream(
        self, context: flight.ServerCallContext, index: int, total: int, start: int, stop: int
    ) -> Iterator[pa.RecordBatch]:
        started, sent = time.monotonic(), 0
        for batch in self.table.batches(start, stop):
            if self._stopping.is_set():
                raise flight.FlightUnavailableError("the cache server is stopping; this partition was not finished")
            if context.is_cancelled():
                self._log.info("cancelled", partition=index, total=total, rows=sent, peer=context.peer())
                return
            yield batch
            sent += batch.num_rows
        seconds = time.monotonic() - started
        self._log.info(
            "served", partition=index, total=total, rows=sent, seconds=round(seconds, 3), peer=context.peer()
        )


def _host(host: str) -> str:
    """A host as a URI holds it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
