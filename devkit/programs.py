"""Run the initializer programs as users do (a process, its environment, its exit code and log lines)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Variables carried over from the caller; everything else (credentials above all) must be given explicitly. PYTHONPATH
#: picks the code the programs run (a worktree's `src`, ahead of the editable install's).
_INHERITED = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


def clean_env(env: dict[str, str]) -> dict[str, str]:
    base = {name: os.environ[name] for name in _INHERITED if name in os.environ}
    return {**base, "LOG_FORMAT": "json", **env}


@dataclass
class ProgramResult:
    code: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """The log events: the JSON lines of stderr, where the programs log (stdout holds data alone: a dry run's
        plan)."""
        parsed = []
        for line in self.stderr.splitlines():
            try:
                parsed.append(json.loads(line))
            except ValueError:
                continue
        return parsed

    @property
    def last(self) -> dict[str, Any]:
        """The last log event: it states the outcome."""
        return self.events[-1] if self.events else {}

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]


def command(kind: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"initializers.{kind}", *args]


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for signal `signum` (its caught signals, /proc's SigCgt)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
    return bool(caught >> (signum - 1) & 1)


def run_program(kind: str, env: dict[str, str], *args: str, timeout: float = 300) -> ProgramResult:
    done = subprocess.run(command(kind, *args), env=clean_env(env), capture_output=True, text=True, timeout=timeout)
    return ProgramResult(done.returncode, done.stdout, done.stderr)


def start_program(kind: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(kind, *args), env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_event(process: subprocess.Popen[str], event: str) -> dict[str, Any]:
    """Read the log of a program `start_program` started (its stderr) until `event`, and return that event; the
    program's exit ends the wait otherwise. What is read here is no longer in what `communicate` returns."""
    assert process.stderr is not None
    read = []
    while line := _one_line(process.stderr.fileno()):
        if f'"event": "{event}"' in line:
            return dict(json.loads(line))
        read.append(line)
    raise AssertionError(f"exited before {event!r}:\n{''.join(read[-20:])}")


def _one_line(descriptor: int) -> str:
    """The next line from `descriptor`, read a byte at a time: a buffered read would take the lines after it too,
    which `communicate` (it reads the descriptor itself) would then never return, such as a run's last event."""
    line = bytearray()
    while not line.endswith(b"\n") and (byte := os.read(descriptor, 1)):
        line += byte
    return line.decode()


#: The TIMEOUTs `run_until_the_deadline_catches` tries in turn: a test's own, short one first, then ones that outlast a
#: start-up slowed by another suite on the same cores (the deadline counts from before the source's imports).
LATER_DEADLINES_SECONDS = (15, 60)


def run_until_the_deadline_catches(
    step: str, first: float, run: Callable[[float], ProgramResult], later: tuple[float, ...] = LATER_DEADLINES_SECONDS
) -> ProgramResult:
    """`run(deadline)` (a run with that TIMEOUT) with a deadline of `first` seconds, then longer ones while the deadline
    caught the run before `step` (a text in what it was waiting for): the deadline is the run's own wall clock, so
    only its length holds the case a test is about. Each run must end as a deadline does (exit 1, saying so, no
    traceback), whichever step it caught; returns the run the deadline caught at `step`. `later`: shorter ones where
    what the run waits for ends on its own (another run's hold)."""
    for deadline in (first, *(longer for longer in later if longer > first)):
        result = run(deadline)
        said = f"TIMEOUT of {deadline:g} s passed while still waiting for "
        assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.last["error"].startswith(said), result.last
        if step in result.last["error"]:
            return result
    raise AssertionError(f"no deadline up to {deadline} s caught the run at {step!r}: {result.last['error']}")


def run_on_terminal(
    kind: str, env: dict[str, str], *args: str, columns: int = 100, lines: int = 30, silence: float = 120
) -> ProgramResult:
    """Run a program with a pseudo-terminal of `columns` x `lines` as its stdin, stdout and stderr, as a person at
    a terminal does (LOG_FORMAT unset); returns what the terminal received, escape sequences and all, as `stdout`.
    A program silent for `silence` seconds is killed (then its code is negative)."""
    terminal_env = {**clean_env(env), "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines), **env}
    if "LOG_FORMAT" not in env:
        del terminal_env["LOG_FORMAT"]
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    process = subprocess.Popen(command(kind, *args), env=terminal_env, stdin=sub, stdout=sub, stderr=sub)
    os.close(sub)
    received = bytearray()
    try:
        while select.select([main], [], [], silence)[0]:
            try:
                chunk = os.read(main, 1 << 16)
            except OSError:  # EIO: every holder of the terminal's other side has closed it
                break
            if not chunk:
                break
            received += chunk
        else:
            process.kill()
    finally:
        os.close(main)
    return ProgramResult(process.wait(), received.decode("utf-8", "replace"), "")
