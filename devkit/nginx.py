"""A real web server on loopback: nginx (Debian's nginx-light, which `make install` puts in /usr/sbin), serving a
folder as any static web server does: `Range` answered 206 with `Content-Range`, a strong `ETag` (its file's mtime and
size) and `Last-Modified` on every file, `If-Match` and `If-Unmodified-Since` answered 412 once the file changed.

Two folders besides the root have their own rules, for the cases a web server differs in: under `/no-ranges/` it
ignores Range (`max_ranges 0`: every answer is the whole file, 200), and each `extra` location (a path and the
directives for it: `add_header Repr-Digest ...`) answers as written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devkit.ports import free_port
from devkit.processes import installed_binary, stop_process_group, wait_until_serving

#: The folder under the root whose files are served without ranges.
NO_RANGES = "no-ranges"


@dataclass
class Nginx:
    endpoint: str
    root: Path
    process: subprocess.Popen[bytes]
    _mtime: int = 0

    @classmethod
    def start(cls, extra: dict[str, str] | None = None, timeout: float = 30.0) -> Nginx:
        """nginx on a free loopback port over a new folder; `extra`: locations (exact paths) and their directives."""
        nginx = installed_binary("nginx", "Debian's nginx-light (make install)")
        home = Path(tempfile.mkdtemp(prefix="nginx-"))
        home.chmod(0o755)  # started as root, its workers run as nobody, who must reach the files
        root = home / "root"
        (root / NO_RANGES).mkdir(parents=True)
        port = free_port()
        locations = "".join(f"location = {path} {{ {rules} }}\n" for path, rules in (extra or {}).items())
        (home / "nginx.conf").write_text(
            f"daemon off; worker_processes 1; pid {home}/nginx.pid; error_log {home}/error.log;\n"
            f"events {{ worker_connections 1024; }}\n"
            f"http {{ access_log off; default_type application/octet-stream; client_body_temp_path {home}/tmp;\n"
            f"proxy_temp_path {home}/tmp; fastcgi_temp_path {home}/tmp; uwsgi_temp_path {home}/tmp;\n"
            f"scgi_temp_path {home}/tmp;\n"
            f"server {{ listen 127.0.0.1:{port}; root {root};\n"
            f"location /{NO_RANGES}/ {{ max_ranges 0; }}\nlocation = /healthz {{ return 200; }}\n{locations}}} }}\n"
        )
        with open(home / "nginx.log", "wb") as log:
            command = [nginx, "-c", str(home / "nginx.conf"), "-p", str(home)]
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = cls(f"http://127.0.0.1:{port}", root, process)
        try:
            wait_until_serving(process, f"{server.endpoint}/healthz", home / "error.log", "nginx", timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def put(self, path: str, data: bytes) -> None:
        """A new version of the file at `path` (under the root): written beside it, then renamed over it, as a
        publisher replaces a file (an answer already streaming keeps the old one)."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.new")
        temporary.write_bytes(data)
        # nginx's ETag is the mtime in whole seconds and the size: a new version gets a later second than the last.
        self._mtime = max(int(time.time()), self._mtime + 1)
        os.utime(temporary, (self._mtime, self._mtime))
        temporary.replace(target)

    def url(self, path: str) -> str:
        return f"{self.endpoint}/{path}"

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.root.parent, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
