"""Faults injected in a store's own reads, for the conformance suite's cases that a relay cannot reach.

A relay (`devkit.relay`) injects faults on the wire, so it checks only a store with an HTTP server in front of it.
This layer injects the same faults where every store meets the engine, inside the program's process: the sink a
`Storage` reads a range into, and its listing. A fault raised from the sink's `write` reaches the store's read loop
as one raised by its own I/O would (its retries and resumption see it), after the bytes before it were accepted:

- `cut`: the read breaks after `after_bytes` of it were written (a connection reset mid-body);
- `throttle`: the read is refused as throttled (retry after 0.3 s) before its first byte;
- `flip`: the first byte of the read's first write is inverted (a wrong answer; past the store's own checks of an
  answer, such as Azure's MD5 of a range: only a checksum the store vouches for catches it);
- `stall`: the read, or the listing (`LISTING`), waits before its first byte until the run stops it;
- `refuse`: the listing fails, as a store refusing it does.

The program runs with the layer installed (`command`): it wraps the class of the store's source (`Store.source`),
and reads small files in threads rather than in the lane (its `Advice` without one), so that every read passes a sink of
its. Each fault fires `times` times at most; each firing, and each file read, is a line in the `hits` file the test
reads.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from devkit.programs import ProgramResult, clean_env
from initializers.common.errors import FetchError
from initializers.store.contract import Advice, Storage
from initializers.store.retry import Retriable

#: The variable the program's process reads its faults from (JSON: `Faults.to_json`).
VARIABLE = "DEVKIT_READ_FAULTS"
#: What a fault's `match` is to be aimed at the store's listing rather than a file's reads.
LISTING = "<listing>"
#: The most a stall waits for the run to stop it: only guards against a hang.
STALL_CEILING_SECONDS = 120.0
_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ReadFault:
    """One fault: `kind` (see the module's docstring) on the reads of the files whose path (or locator) contains
    `match` (or on the listing: `LISTING`), `times` times at most, `after_bytes` into a read (a cut)."""

    kind: str
    match: str
    times: int = 1
    after_bytes: int = 0


@dataclass(frozen=True)
class Faults:
    """The faults of one run, the class they are installed on (`module:qualname`) and the file their hits go to."""

    source: str
    faults: tuple[ReadFault, ...]
    hits: str

    def to_json(self) -> str:
        return json.dumps({"source": self.source, "faults": [asdict(f) for f in self.faults], "hits": self.hits})

    @classmethod
    def from_json(cls, text: str) -> Faults:
        data = json.loads(text)
        return cls(data["source"], tuple(ReadFault(**f) for f in data["faults"]), data["hits"])

    def hit_counts(self) -> list[int]:
        """How many times each fault fired (in the order of `faults`), as the program's process recorded them."""
        lines = Path(self.hits).read_text().splitlines() if Path(self.hits).exists() else []
        return [lines.count(str(number)) for number in range(len(self.faults))]

    def reads(self) -> list[str]:
        """The paths of the files read, once per range, in the order the reads began."""
        lines = Path(self.hits).read_text().splitlines() if Path(self.hits).exists() else []
        return [line[len("read ") :] for line in lines if line.startswith("read ")]


def faults_for(source_class: type, faults: list[ReadFault], folder: Path) -> Faults:
    """`faults` on the reads of `source_class`'s sources, their hits recorded in `folder`."""
    return Faults(f"{source_class.__module__}:{source_class.__qualname__}", tuple(faults), str(folder / "hits"))


def command(kind: str) -> list[str]:
    """The `kind` program, started with the layer installed (devkit is beside `src/`, not installed)."""
    start = f"import sys; sys.path.insert(0, {str(_ROOT)!r}); from devkit.read_faults import main; main()"
    return [sys.executable, "-c", start, kind]


def env_with(faults: Faults, env: dict[str, str]) -> dict[str, str]:
    return {**env, VARIABLE: faults.to_json()}


# -- in the program's process -----------------------------------------------------------------------------------------


class _Injector:
    """The faults of one run, firing from whichever thread reads; `release` ends the stalls (the run is stopping)."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._left = [fault.times for fault in faults.faults]
        self._lock = threading.Lock()
        self.release = threading.Event()

    def note(self, line: str) -> None:
        with self._lock, open(self._faults.hits, "a") as hits:
            hits.write(f"{line}\n")

    def take(self, target: str, kinds: tuple[str, ...]) -> ReadFault | None:
        """The next fault aimed at `target` (a file's path, or `LISTING`) of one of `kinds` with firings left, now
        counted as fired."""
        with self._lock:
            for number, fault in enumerate(self._faults.faults):
                aimed = target == LISTING if fault.match == LISTING else fault.match in target
                if aimed and fault.kind in kinds and self._left[number] > 0:
                    self._left[number] -= 1
                    with open(self._faults.hits, "a") as hits:
                        hits.write(f"{number}\n")
                    return fault
        return None

    def stall(self) -> None:
        """Wait before the first byte until the run is stopped (its source interrupted), then fail as a dropped
        connection does."""
        self.release.wait(STALL_CEILING_SECONDS)
        raise ConnectionResetError("stalled read interrupted (injected)")


class _FaultySink:
    """The sink a store reads one range into, with the faults aimed at the range's file."""

    def __init__(self, sink: Any, path: str, injector: _Injector) -> None:
        self._sink = sink
        self._path = path
        self._injector = injector
        self._started = False
        self._cut: ReadFault | None = None
        self._at_cut = 0

    @property
    def written(self) -> int:
        return int(self._sink.written)

    def expect(self, checksum: Any) -> None:
        self._sink.expect(checksum)

    def rewind(self) -> None:
        self._sink.rewind()

    def write(self, data: memoryview) -> None:
        if not self._started:
            self._started = True
            if self._injector.take(self._path, ("throttle",)):
                self._started = False  # the next attempt's first byte is a first byte again
                raise Retriable("503 throttled (injected)", throttled=True, retry_after=0.3)
            if self._injector.take(self._path, ("stall",)):
                self._injector.stall()
            if self._injector.take(self._path, ("flip",)):
                flipped = bytearray(data)
                flipped[0] ^= 0xFF
                data = memoryview(flipped)
            self._cut = self._injector.take(self._path, ("cut",))
            self._at_cut = self._sink.written + (self._cut.after_bytes if self._cut else 0)
        if self._cut is not None and self._sink.written + len(data) > self._at_cut:
            self._sink.write(data[: self._at_cut - self._sink.written])
            self._cut, self._started = None, False
            raise ConnectionResetError("connection reset mid-body (injected)")
        self._sink.write(data)


def _install(faults: Faults) -> None:
    """Wrap the source class's reads, listing, lane and interruption with `faults`."""
    module, _, name = faults.source.partition(":")
    source_class = getattr(importlib.import_module(module), name)
    injector = _Injector(faults)
    read, list_files = getattr(source_class, "read", None), source_class.list_files
    advice, interrupt = source_class.advice, source_class.interrupt

    def faulty_advice(self: Any) -> Advice:
        return replace(advice(self), lane=None)  # every read through `read`, with a sink of ours

    def faulty_read(self: Any, file: Any, offset: int, length: int, sink: Any) -> None:
        injector.note(f"read {file.path}")
        # Aimed by its path or its locator: a one-file store's file lands under its name alone, its URL the path put.
        read(self, file, offset, length, _FaultySink(sink, f"{file.path} {file.locator}", injector))

    def faulty_list_files(self: Any) -> Iterator[Any]:
        fault = injector.take(LISTING, ("stall", "refuse"))
        if fault is not None and fault.kind == "stall":
            injector.stall()
        if fault is not None:
            raise FetchError("the listing was refused (injected)")
        yield from list_files(self)

    def faulty_interrupt(self: Any) -> None:
        injector.release.set()
        interrupt(self)

    source_class.list_files, source_class.interrupt = faulty_list_files, faulty_interrupt
    if issubclass(source_class, Storage):  # a Maker's reads are its library's: only its listing is reached
        source_class.advice, source_class.read = faulty_advice, faulty_read


def main() -> None:
    """The program named by the first argument, with the faults of `VARIABLE` installed."""
    kind = sys.argv.pop(1)
    _install(Faults.from_json(os.environ[VARIABLE]))
    runpy.run_module(f"initializers.{kind}", run_name="__main__", alter_sys=True)


def run_program(faults: Faults, kind: str, env: dict[str, str], timeout: float) -> ProgramResult:
    """`devkit.programs.run_program`, with `faults` installed in the program's process."""
    done = subprocess.run(command(kind), env=clean_env(env_with(faults, env)), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    return ProgramResult(done.returncode, done.stdout, done.stderr)


def start_program(faults: Faults, kind: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`devkit.programs.start_program`, with `faults` installed in the program's process."""
    return subprocess.Popen(command(kind), env=clean_env(env_with(faults, env)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
