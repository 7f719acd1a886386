"""Free loopback ports, for servers started by tests, the demo and benchmarks."""

from __future__ import annotations

import socket


def is_free(port: int) -> bool:
    with socket.socket() as probe:
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
