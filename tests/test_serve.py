"""`make serve` (devkit/serve.py) holding its ports: of two started at once one serves, the other is refused naming
the port, and nothing of either outlives them; a port taken while SeaweedFS starts is reported the same way."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit import playground
from devkit.playground import Ports
from devkit.ports import free_port, is_free
from devkit.serve import STOP_SIGNALS, main

ROOT = Path(__file__).resolve().parents[1]
#: A hang guard for `make serve` to serve (start and seed its servers) or end, far above the seconds it takes.
HANG_GUARD = 300


def _processes_naming(text: str) -> list[int]:
    """The processes whose command line names `text` (SeaweedFS's names its data folder)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # gone meanwhile
    return found


def _watch(process: subprocess.Popen[str], index: int, outcomes: queue.Queue[tuple[int, str]]) -> list[str]:
    """A thread keeps reading `process`'s output into the list returned; it tells `outcomes` when the process
    serves (its line before Ctrl-C), and when its output ends."""
    printed: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            printed.append(line)
            if "Ctrl-C" in line:
                outcomes.put((index, "serving"))
        outcomes.put((index, "ended"))

    threading.Thread(target=read, daemon=True).start()
    return printed


@pytest.mark.slow  # two make serve, one of which starts and seeds the real servers
def test_of_two_make_serve_at_once_one_serves_and_the_other_is_refused_naming_the_port(tmp_path: Path) -> None:
    base = free_port((0, 1, 2, 3, 4))  # free ports, given to both as the documented ones are: the race is the same
    temp = tmp_path / "tmp"  # each one's temp folder: the data folder, and whatever else its servers leave
    temp.mkdir()
    command = [sys.executable, "-m", "devkit.serve", "--base-port", str(base)]
    stderr = [tmp_path / f"stderr-{index}" for index in range(2)]
    both = []
    for path in stderr:
        with path.open("w") as error:
            both.append(subprocess.Popen(command, cwd=ROOT, env={**os.environ, "TMPDIR": str(temp)},
                                         stdout=subprocess.PIPE, stderr=error, text=True))  # fmt: skip
    outcomes: queue.Queue[tuple[int, str]] = queue.Queue()
    printed = [_watch(process, index, outcomes) for index, process in enumerate(both)]
    try:
        first: dict[int, str] = {}
        while len(first) < 2:
            index, outcome = outcomes.get(timeout=HANG_GUARD)
            first.setdefault(index, outcome)
        assert sorted(first.values()) == ["ended", "serving"], [path.read_text() for path in stderr]
        served = next(index for index, outcome in first.items() if outcome == "serving")
        refused = 1 - served
        assert first[refused] == "ended"
        assert both[refused].wait(HANG_GUARD) == 1
        message = stderr[refused].read_text()
        assert re.search(rf"^make serve: ports? (\d+, )*{base + 1}\b.* in use", message), message  # the Hub's, held
        assert printed[refused] == [], "refused before it starts anything or makes a data folder"
        data = Path(re.search(r"data in (\S+?)\)", printed[served][0])[1])  # type: ignore[index]
        assert list(temp.iterdir()) == [data]
        assert _processes_naming(str(temp)), "SeaweedFS serves, its data in the temp folder"
    finally:
        for process in both:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # Ctrl-C
        codes = [process.wait(HANG_GUARD) for process in both]
    assert codes[served] == 0 and "stopped by SIGINT" in "".join(printed[served])
    assert list(temp.iterdir()) == [], "no data folder, nor anything else, is left"
    assert _processes_naming(str(temp)) == [], "no server outlives make serve"


@pytest.fixture
def stop_signals_restored() -> Iterator[None]:
    """`main` handles the stop signals itself; pytest's own come back after the test."""
    saved = {stop_signal: signal.getsignal(stop_signal) for stop_signal in STOP_SIGNALS}
    yield
    for stop_signal, handler in saved.items():
        signal.signal(stop_signal, handler)


@pytest.mark.slow  # a real SeaweedFS
@pytest.mark.usefixtures("stop_signals_restored")
def test_the_s3_port_taken_while_seaweedfs_starts_is_refused_naming_it_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The S3 port is let go for SeaweedFS, a process of its own, to bind: whatever takes it in that moment makes
    SeaweedFS exit, which is reported as the port in use, with the Hub's ports let go and the data folder removed."""
    ports = Ports.from_base(free_port((0, 1, 2, 3, 4)))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    start = playground.SeaweedFS.start
    with socket.socket() as squatter:

        def start_once_something_took_the_port(**options: object) -> playground.SeaweedFS:
            squatter.bind(("127.0.0.1", ports.s3))
            squatter.listen()
            return start(**options)  # type: ignore[arg-type]

        monkeypatch.setattr(playground.SeaweedFS, "start", start_once_something_took_the_port)
        assert main(["--base-port", str(ports.s3)]) == 1
        printed = capsys.readouterr()
        assert f"make serve: port {ports.s3} of 127.0.0.1 is in use" in printed.err, printed.err
        assert "Traceback" not in printed.err
    assert is_free(ports.hub) and is_free(ports.hub_cdn)
    assert list(tmp_path.iterdir()) == [] and _processes_naming(str(tmp_path)) == []
