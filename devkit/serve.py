"""`make serve`: the playground's servers (devkit/playground.py) on the documented ports until Ctrl-C.

It prints the `export` lines a user pastes into another shell before trying the front page's snippets. The servers'
data lives in one temp folder, removed when they stop (Ctrl-C, SIGTERM or SIGHUP). Ports in use are refused with
exit 1 naming them, rather than moved: the documentation names them. The check holds them until the servers bind them
(devkit.playground.HeldPorts): of two `make serve` started at once, one serves and the other is refused.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import astuple
from pathlib import Path
from types import FrameType

from devkit import playground
from devkit.playground import DOCUMENTED_PORTS, HeldPorts, Ports, PortsInUse
from devkit.ports import is_free

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """A stop signal arrived."""


def taken(ports: Ports) -> list[int]:
    return [port for port in astuple(ports) if not is_free(port)]


def refusal(busy: PortsInUse) -> str:
    """What `make serve` says when it cannot have its ports: each one taken now (else the one a server failed on)."""
    named = taken(busy.needed) or busy.ports
    which = f"port {named[0]} of 127.0.0.1 is" if len(named) == 1 else f"ports {_listed(named)} of 127.0.0.1 are"
    return (
        f"make serve: {which} in use (the playground needs {_listed(astuple(busy.needed))}): stop what listens "
        "there, maybe another `make serve`"
    )


def _listed(ports: Sequence[int]) -> str:
    return ", ".join(map(str, ports))


def export_lines(variables: dict[str, str]) -> list[str]:
    """What a user pastes: the programs of this venv on PATH, then the variables, quoted for the shell."""
    venv_bin = Path(sys.executable).parent  # not resolved: the venv's python is a link to the system's
    return [f'export PATH={shlex.quote(str(venv_bin))}:"$PATH"'] + [
        f"export {name}={shlex.quote(value)}" for name, value in variables.items()
    ]


def _stop(signum: int, _frame: FrameType | None) -> None:
    for stop_signal in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
        signal.signal(stop_signal, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make serve", description=__doc__.splitlines()[0])
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--any-ports", action="store_true", help="free ports instead of the documented (for tests)")
    choice.add_argument(
        "--base-port",
        type=int,
        metavar="N",
        help="S3 on N, the Hub on N+1 and its CDN on N+2, instead of the documented, refused alike when in use (tests)",
    )
    args = parser.parse_args(argv)
    ports = None if args.any_ports else Ports.from_base(args.base_port) if args.base_port else DOCUMENTED_PORTS
    try:
        held = HeldPorts(ports)
    except PortsInUse as busy:
        print(refusal(busy), file=sys.stderr)
        return 1
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, _stop)
    root = Path(tempfile.mkdtemp(prefix="initializers-serve-"))
    print(f"starting the playground's servers and seeding them (data in {root}) ...", flush=True)
    try:
        with held, playground.running(root, held) as servers:
            print("\n".join(["", *servers.sources(), "", "paste these lines into another shell:"]))
            print("\n".join(export_lines(servers.variables())))
            print("\nthen try the front page's snippets. Ctrl-C stops the servers and removes their data.", flush=True)
            while True:
                signal.pause()
    except PortsInUse as busy:  # taken in the moment SeaweedFS's was let go (the servers are stopped by now)
        print(refusal(busy), file=sys.stderr)
        return 1
    except Stopped as stop:
        print(f"stopped by {stop}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
