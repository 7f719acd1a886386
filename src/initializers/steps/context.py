"""What every step of one run reads (`RunContext`), and what the run is waiting for when a stop names it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from initializers.config.contract import Config, Kind
from initializers.process.stopping import Stop
from initializers.transfer.engine import Engine


class Waiting:
    """What the run is waiting for, named when it is stopped: a step, or the files being transferred."""

    def __init__(self) -> None:
        self.step = "the source to answer"
        self.transfers: Engine | None = None

    def current(self) -> str:
        files = [file.path for file in self.transfers.in_flight()] if self.transfers is not None else []
        if not files:
            return self.step
        return f"{len(files)} files: {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}"


@dataclass(frozen=True)
class RunContext:
    """One run's configuration, program, log and stop, and what it waits for (which the steps say as they go)."""

    config: Config
    kind: Kind
    log: Any
    stop: Stop
    waiting: Waiting = field(default_factory=Waiting)
