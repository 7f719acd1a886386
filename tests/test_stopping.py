"""Stopping a run whose listing never finishes: SIGTERM, SIGINT and TIMEOUT still end it, promptly and cleanly.

The servers (`devkit.stalling`) pose as S3 and the Hub and answer the listing never, or with pages that go on for
ever. The ceilings below are generous, stated bounds for a shared machine, not timings: without the fix the runs
never ended at all.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.programs import (
    ProgramResult,
    catches,
    run_program,
    run_until_the_deadline_catches,
    start_program,
    wait_for_event,
)
from devkit.stalling import Stall, StallingHub, StallingS3, StallingServer
from initializers.common.errors import FetchError, Stopped
from initializers.process.stopping import StoppingClock, stoppable
from initializers.store.retry import retrying

#: Seconds a stopped run may take to exit, at most: far more than it needs, far less than "never".
STOP_CEILING_SECONDS = 15.0


def s3_run(server: StallingServer, output: Path) -> dict[str, str]:
    return {"STORAGE_URI": "s3://bucket/data", "ENDPOINT": server.endpoint, "ANONYMOUS": "true",
            "OUTPUT_PATH": str(output)}  # fmt: skip


def hub_run(server: StallingServer, output: Path) -> dict[str, str]:
    return {"STORAGE_URI": "hf://org/endless", "HF_ENDPOINT": server.endpoint, "OUTPUT_PATH": str(output)}


POSERS = {
    "s3-silent": (StallingS3, Stall.SILENT, s3_run),
    "s3-endless": (StallingS3, Stall.ENDLESS, s3_run),
    "s3-slow": (StallingS3, Stall.SLOW, s3_run),
    "hub-silent": (StallingHub, Stall.SILENT, hub_run),
    "hub-endless": (StallingHub, Stall.ENDLESS, hub_run),
}


@pytest.fixture(params=sorted(POSERS))
def stalled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StallingServer, dict[str, str]]]:
    server_class, stall, environment = POSERS[request.param]
    with server_class(stall, pause=0.5) as server:
        yield server, environment(server, tmp_path / "out")


def test_the_deadline_ends_a_run_whose_listing_never_finishes(stalled: tuple[StallingServer, dict[str, str]]):
    server, env = stalled
    output = Path(env["OUTPUT_PATH"])

    def run(deadline: int) -> ProgramResult:
        result = run_program("dataset", {**env, "TIMEOUT": str(deadline)}, timeout=deadline + STOP_CEILING_SECONDS)
        assert not output.exists(), "nothing landed: the folder it made goes, its plan index too"
        return result

    run_until_the_deadline_catches("the listing of", 3, run)
    assert server.listing_requests >= 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_run_whose_listing_never_finishes(
    stalled: tuple[StallingServer, dict[str, str]], signum: signal.Signals
):
    server, env = stalled
    Path(env["OUTPUT_PATH"]).mkdir()  # found empty, left empty
    process = start_program("dataset", env)
    try:
        wait_for_event(process, "listing")
        # Stalled from the first page, or a few pages in, where the transfer threads are waiting for files.
        server.wait_for_listing(1 if server.stall is Stall.SILENT else 3)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=STOP_CEILING_SECONDS)
    finally:
        process.kill()
    result = ProgramResult(process.returncode, stdout, stderr)
    assert result.code == 1, stderr
    assert f"stopped by {signum.name} while waiting for" in result.last["error"]
    assert "Traceback" not in stderr
    assert list(Path(env["OUTPUT_PATH"]).iterdir()) == [], "nothing landed: nothing of the run's state stays"


def halted_once_it_catches(process: subprocess.Popen[str], signum: int) -> None:
    """Leave `process` halted (SIGSTOP) at the first look that finds it catching `signum`: it is looked at only while
    halted, so a signal sent before it goes on (SIGCONT) lands where that look saw it, however late this process
    gets the CPU on a loaded machine. Between looks it runs as long as this process sleeps (1 ms, and what the
    scheduler adds), far less than the imports between its first line and the run's start."""
    while process.poll() is None:
        process.send_signal(signal.SIGSTOP)
        while process.poll() is None and _state(process.pid) not in ("T", "Z"):
            time.sleep(0)
        if process.poll() is None and catches(process.pid, signum):
            return
        process.send_signal(signal.SIGCONT)
        time.sleep(0.001)
    raise AssertionError(f"exited (code {process.returncode}) before it caught {signal.Signals(signum).name}")


def _state(pid: int) -> str:
    """A process's state letter from /proc (T: halted, Z: exited)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


#: Where the signal lands after the program's first line has its handler in: during the imports, the parsing, the
#: logs' setup, the run's first steps. Spread points, not bounds: at every one the stop must read as a stop.
LANDINGS_SECONDS = (0.0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.25)


@pytest.mark.parametrize("kind", ["dataset", "model"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_from_the_first_milliseconds_reads_as_a_stop(tmp_path: Path, signum: signal.Signals, kind: str):
    """Once the program's first line is done (SIGTERM caught, which Python alone never does), a stop ends the run
    with exit 1 and `stopped by ...`, never a traceback, click's `Aborted!` or death by the signal; one that lands
    at once, during the imports, says that the run had not begun."""
    with StallingS3(Stall.SILENT, pause=0.5) as server:
        for delay in LANDINGS_SECONDS:
            process = start_program(kind, s3_run(server, tmp_path / f"out-{delay}"))
            try:
                if delay:
                    while process.poll() is None and not catches(process.pid, signal.SIGTERM):
                        time.sleep(0.001)
                    time.sleep(delay)
                    process.send_signal(signum)
                else:  # where the program is when the handler is seen is where the signal finds it
                    halted_once_it_catches(process, signal.SIGTERM)
                    process.send_signal(signum)
                    process.send_signal(signal.SIGCONT)
                stdout, stderr = process.communicate(timeout=STOP_CEILING_SECONDS)
            finally:
                process.kill()
            result = ProgramResult(process.returncode, stdout, stderr)
            assert result.code == 1, (delay, stderr)
            assert result.last["error"].startswith(f"stopped by {signum.name} "), (delay, result.last)
            assert "Traceback" not in stderr and "Aborted!" not in stdout + stderr, (delay, stderr)
            if delay == 0:
                assert result.last["error"] == f"stopped by {signum.name} before the run began"
            assert not (tmp_path / f"out-{delay}").exists(), (delay, sorted((tmp_path / f"out-{delay}").rglob("*")))


def test_no_attempt_starts_once_interrupted():
    """A listing that pages for ever asks for its next page through the retry policy: once the run is interrupted,
    that request is not sent, even when the interrupt came between two requests (nothing to abort then)."""
    attempts: list[int] = []
    with pytest.raises(FetchError, match="the listing of s3://b/: interrupted"):
        retrying("list", "the listing of s3://b/", lambda: attempts.append(1), interrupted=lambda: True)
    assert attempts == []


def test_a_signal_is_recorded_and_raised_where_the_main_thread_checks_for_it():
    """Not mid-bytecode: a stop landing inside a thread's start or a close would surface as an internal error."""
    with stoppable(None, lambda: "the test") as stop:
        signal.raise_signal(signal.SIGINT)  # its handler runs before the next line: it only records the stop
        with pytest.raises(Stopped, match=r"^stopped by SIGINT while waiting for the test$"):
            stop.check()


def test_within_an_interruptible_wait_a_signal_raises_at_once_and_a_second_one_is_ignored():
    """A wait in a library's call (opening the source, a dry run's listing) ends only if the signal raises there."""
    with stoppable(None, lambda: "a library") as stop:
        with pytest.raises(Stopped, match="stopped by SIGTERM while waiting for a library"), stop.interruptible():
            signal.raise_signal(signal.SIGTERM)
            pytest.fail("the signal did not interrupt the wait")
        signal.raise_signal(signal.SIGINT)  # during the cleanup of the first stop: ignored
        with pytest.raises(Stopped, match="stopped by SIGTERM"):
            stop.check()


def test_the_deadline_ends_a_wait_through_the_stopping_clock():
    """Waiting for another run's lock sleeps through this clock: the deadline ends the wait within one sleep."""
    with stoppable(0.05, lambda: "another initializer") as stop, pytest.raises(Stopped) as stopped:
        clock = StoppingClock(stop)
        for _ in range(1000):  # a ceiling of 10 s of sleeps, for a deadline of 0.05 s
            clock.sleep(0.01)
    assert str(stopped.value) == "TIMEOUT of 0.05 s passed while still waiting for another initializer"
