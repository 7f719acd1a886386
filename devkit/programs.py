"""Run the initializer programs as users do (a process, its environment, its exit code and log lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

#: Variables carried over from the caller; everything else (credentials above all) must be given explicitly.
_INHERITED = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


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
        """The JSON lines of stdout, then of stderr (where a dry run logs, its plan owning stdout)."""
        parsed = []
        for line in [*self.stdout.splitlines(), *self.stderr.splitlines()]:
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


def run_program(kind: str, env: dict[str, str], *args: str, timeout: float = 300) -> ProgramResult:
    done = subprocess.run(command(kind, *args), env=clean_env(env), capture_output=True, text=True, timeout=timeout)
    return ProgramResult(done.returncode, done.stdout, done.stderr)


def start_program(kind: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(kind, *args), env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
