"""`cache-server` / `python -m initializers.cache_server`: a completed cache:// materialisation served over Arrow
Flight, as Kubeflow's data cache serves a table, so training code written for its `DataCacheDataset` reads the shards in
OUTPUT_PATH unchanged (the protocol: `cache.flight`).

A program of its own beside the two initializers: PORT, BIND_ADDRESS and ADVERTISE_HOST mean nothing to them, so they
are not part of the initializers' contract (`contract.Config`) but declared and parsed the same way, with the same
codecs; LOG_FORMAT / LOG_LEVEL are the contract's own. It refuses to start (exit 1) on a folder without a complete
materialisation, and stops on SIGTERM or SIGINT (exit 0): open streams end with an error at their next batch, and the
process exits within `SHUTDOWN_GRACE` seconds even when a reader has stopped reading.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from initializers.cache.arrow_memory import prefer_system_allocator
from initializers.cli import EXIT_BAD_CONFIG, EXIT_FETCH_FAILED, EXIT_OK, exit_now, failed, options_for
from initializers.common.errors import ConfigError, FetchError
from initializers.config.contract import Config
from initializers.config.settings import Codec, parse_schema, setting_field, setting_fields, settings_of, whole_number
from initializers.sources import DATASET

PROGRAM = "cache-server"
#: Kubeflow's cache Service listens there (`<TRAIN_JOB_NAME>-cache-service:50051`).
DEFAULT_PORT = 50051
#: Seconds open streams get to end once a stop is asked for; Kubernetes waits 30 s before it kills a container.
SHUTDOWN_GRACE = 5.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


PORT_NUMBER: Codec[int] = Codec(whole_number(1, 65535), str, "a port number, 1 to 65535")


def _the_contracts(name: str) -> Any:
    """A field declared as the contract declares it: one variable, one meaning, one help text."""
    (found,) = (f for f in setting_fields(Config) if f.name == name)
    return dataclasses.field(default=found.default, metadata=found.metadata)


@dataclass(frozen=True)
class ServerConfig:
    """The server's configuration, from its variables (or options)."""

    output_path: str = setting_field(
        "OUTPUT_PATH",
        f"The completed cache:// materialisation to serve [default: {DATASET.default_output_path}].",
        default=DATASET.default_output_path,
    )
    port: int = setting_field(
        "PORT", f"Port to listen on [default: {DEFAULT_PORT}].", PORT_NUMBER, default=DEFAULT_PORT
    )
    bind_address: str = setting_field(
        "BIND_ADDRESS", "Address to listen on [default: 0.0.0.0, every IPv4 interface].", default="0.0.0.0"
    )
    advertise_host: str | None = setting_field(
        "ADVERTISE_HOST",
        "Host named in the endpoints' locations, where readers fetch their partitions: a pod IP, a Service name, "
        "127.0.0.1 for a sidecar [default: POD_IP, else the address this host's name resolves to: a pod's IP].",
        fallback_env=("POD_IP",),
    )
    log_format: str | None = _the_contracts("log_format")
    log_level: str | None = _the_contracts("log_level")

    @classmethod
    def from_env(cls, env: Mapping[str, str], options: Mapping[str, str | None] | None = None) -> ServerConfig:
        return parse_schema(cls, env, options)

    def advertised(self) -> str:
        if self.advertise_host:
            return self.advertise_host
        name = socket.gethostname()
        try:
            return socket.gethostbyname(name)  # a pod's own name resolves to its IP (/etc/hosts)
        except OSError:
            return name


def exit_code(options: Mapping[str, str | None]) -> int:
    """Parse, open the table, serve until a stop signal; every outcome ends in one log line saying what happened."""
    from initializers.common import logs
    from initializers.process import workspace_owner

    try:
        config = ServerConfig.from_env(os.environ, options)
    except ConfigError as exc:
        logs.configure(None, None, secrets=())
        return failed(logs.get_logger(PROGRAM), str(exc), EXIT_BAD_CONFIG)
    logs.configure(config.log_format, config.log_level, secrets=())
    log = logs.get_logger(PROGRAM)
    workspace_owner.adopt(config.output_path, log)  # in the image, started as root: read as its owner
    prefer_system_allocator()
    try:
        from initializers.cache.flight import CacheFlightServer
    except ImportError as exc:
        return failed(log, f"{PROGRAM} needs pyarrow (the cache extra, in the dataset image): {exc}", EXIT_FETCH_FAILED)
    from initializers.cache.shards import MaterialisedTable

    # Blocked before any thread starts, so gRPC's threads inherit the mask and only `sigwait` below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        table = MaterialisedTable.open(Path(config.output_path))
    except FetchError as exc:
        return failed(log, str(exc), exc.exit_code)
    try:
        server = CacheFlightServer(table, config.bind_address, config.port, config.advertised(), log)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowException is both
        return failed(log, f"cannot listen on {config.bind_address}:{config.port}: {exc}", EXIT_FETCH_FAILED)
    log.info("serving", output_path=str(table.folder), rows=table.rows, files=table.files,
             bind=f"{config.bind_address}:{server.port}", location=server.location.uri.decode(),
             snapshot_id=table.source.get("snapshot_id"))  # fmt: skip
    received = signal.Signals(signal.sigwait(_STOP_SIGNALS)).name
    log.info("stopping", signal=received)
    ended = server.stop(SHUTDOWN_GRACE)
    log.info("stopped", signal=received, streams_ended=ended)
    return EXIT_OK


def main() -> None:
    def callback(**options: str | None) -> NoReturn:
        exit_now(exit_code(options))

    command = click.Command(
        name=PROGRAM,
        params=options_for(settings_of(ServerConfig)),
        callback=callback,
        help="Serve the cache:// materialisation in OUTPUT_PATH over Arrow Flight, as Kubeflow's data cache does.",
        epilog="Every option can also be given as the environment variable named in brackets. Exit codes: 0 stopped "
        "by SIGTERM or SIGINT, 1 no complete materialisation to serve (or the port is taken), 2 bad configuration.",
        context_settings={"max_content_width": 110, "terminal_width": 110},
    )
    command.main(prog_name=PROGRAM)


if __name__ == "__main__":
    main()
