"""Free loopback ports, for servers started by tests, the demo and benchmarks."""

from __future__ import annotations

import socket


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


def free_port(offsets: tuple[int, ...] = (0,)) -> int:
    """A port p such that p + every offset is free (SeaweedFS also binds port + 10000 for gRPC)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + max(offsets) < 65536 and all(is_free(port + offset) for offset in offsets):
            return port
    raise RuntimeError("no free loopback port found")
