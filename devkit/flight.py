"""`cache-server` as tests and benchmarks run it (a process on loopback), and a reader written from Kubeflow's
data-cache protocol, as its `DataCacheDataset` reads: `get_flight_info` for a partition, then `do_get` at each
endpoint's location."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from devkit.ports import free_port
from devkit.processes import stop_process_group
from devkit.programs import clean_env, command


class CacheServer:
    """The server over `folder`, listening on a free loopback port; its JSON log lines land in `log`."""

    def __init__(self, folder: Path, log: Path, timeout: float = 60.0, **env: str) -> None:
        self.port = free_port()
        self.log = log
        variables = {"OUTPUT_PATH": str(folder), "PORT": str(self.port), "BIND_ADDRESS": "127.0.0.1",
                     "ADVERTISE_HOST": "127.0.0.1", **env}  # fmt: skip
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command("cache_server"), env=clean_env(variables), stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not any(event.get("event") == "serving" for event in self.events()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"cache-server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)

    @property
    def address(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def stop(self) -> None:
        stop_process_group(self.process)

    def __enter__(self) -> CacheServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def read_partition(address: str, index: int, total: int) -> pa.Table:
    """Partition `index` of `total`, as Kubeflow's reader gets it: its flight info, then every endpoint's rows from
    the endpoint's first location."""
    info = flight.FlightClient(address).get_flight_info(flight.FlightDescriptor.for_path(str(index), str(total)))
    tables = []
    for endpoint in info.endpoints:
        with flight.FlightClient(endpoint.locations[0]) as client:
            tables.append(client.do_get(endpoint.ticket).read_all())
    return pa.concat_tables(tables) if tables else info.schema.empty_table()
