"""Free loopback ports, for servers started by tests, the demo and benchmarks, held from the choice until they bind.

A server in this process binds port 0 and says which it got; a server that is a process of its own (SeaweedFS, moto,
the emulators, olah) needs its port named on its command line, so `free_port` chooses one no one else will take
before the server binds it: outside the kernel's ephemeral range (where bind(0) and outgoing connections take their
ports, so no connection of any process lands there), and claimed by this process, for as long as it lives, through
an abstract Unix socket named after the port (so no other devkit process, an xdist worker or a second suite, chooses
it too; the kernel drops the claim when the process ends, leaving no file behind).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Where the choice starts: above the well-known and registered ports that services on a machine tend to take.
LOWEST = 10000
#: The claims this process holds (each an abstract Unix socket), for as long as it lives.
_claims: list[socket.socket] = []


def is_free(port: int) -> bool:
    """Whether a server can listen on `port` now: bound with SO_REUSEADDR, as servers bind, so that connections of
    an earlier server still in TIME_WAIT do not count."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def claim(port: int) -> bool:
    """Claim `port` for this process, for as long as it lives; False when another process has it claimed."""
    holder = socket.socket(socket.AF_UNIX)
    try:
        holder.bind(f"\0initializers-devkit-port-{port}")
    except OSError:
        holder.close()
        return False
    _claims.append(holder)
    return True


def _ephemeral() -> range:
    """The kernel's ephemeral port range (Linux's default when it cannot be read)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port(offsets: tuple[int, ...] = (0,)) -> int:
    """A port p such that p + every offset is free (SeaweedFS also binds port + 10000 for gRPC), all of them outside
    the ephemeral range and claimed by this process."""
    ephemeral, reach = _ephemeral(), max(offsets)
    below, above = range(LOWEST, ephemeral.start - reach), range(ephemeral.stop, 65536 - reach)
    candidates = below if len(below) >= len(above) else above
    for _ in range(500):
        port = random.choice(candidates)
        wanted = [port + offset for offset in offsets]
        if all(is_free(each) for each in wanted) and all(claim(each) for each in wanted):
            return port
    raise RuntimeError("no free loopback port found")
