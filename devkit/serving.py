"""A socketserver served from a daemon thread, for the small servers the tests stand up on loopback."""

from __future__ import annotations

import socketserver
import threading


class ServedInThread:
    """Serves `server` from a daemon thread once started; `stop` shuts it down and closes its socket."""

    def __init__(self, server: socketserver.BaseServer, name: str, poll_interval: float = 0.5) -> None:
        self.server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": poll_interval}, name=name, daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
