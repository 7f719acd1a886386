"""Azure Blob Storage on loopback: Azurite, Microsoft's emulator (npm, in .venvs/azurite), with SharedKey enforced.

Its one account is Azure's public development account (devstoreaccount1 and its well-known key), addressed path
style: `http://127.0.0.1:PORT/devstoreaccount1/CONTAINER/BLOB`. Its data lives in a temp folder: blob bytes in extent
files under `__blobstorage__/`, their properties (Content-MD5 among them) in a JSON database beside them, so a byte
flipped in an extent is served under the old Content-MD5. Telemetry, on by default, is turned off.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from devkit.ports import free_port
from devkit.processes import stop_process_group

AZURITE_BLOB = Path(__file__).resolve().parents[1] / ".venvs" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
API_VERSION = "2025-01-05"  # any version Azurite knows; --skipApiVersionCheck lets newer clients in too

#: Headers signed in this order before the x-ms-* ones (SharedKey, versions 2015-02-21 and later).
_SIGNED_HEADERS = ("Content-Encoding", "Content-Language", "Content-Length", "Content-MD5", "Content-Type", "Date",
                   "If-Modified-Since", "If-Match", "If-None-Match", "If-Unmodified-Since", "Range")  # fmt: skip


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Azurite:
    endpoint: str  # the account's blob endpoint, http://127.0.0.1:PORT/devstoreaccount1
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path

    @classmethod
    def start(cls, timeout: float = 60.0, parent: Path | None = None, loose: bool = False) -> Azurite:
        """Serve Blob Storage on a free port, with the data in a new folder under `parent` (else the temp folder),
        removed by `stop`. Strict by default: a header Azurite does not implement (x-ms-range-get-content-crc64
        among them) is answered 500 FeatureNotSupported; `loose` ignores such headers instead."""
        if not AZURITE_BLOB.exists():
            raise RuntimeError(f"{AZURITE_BLOB} is missing: run `make install` (it needs npm)")
        data_dir = Path(tempfile.mkdtemp(prefix="azurite-", dir=parent))
        port = free_port()
        log_path = data_dir / "azurite.log"
        command = [
            str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(data_dir / "data"),
            "--silent", "--skipApiVersionCheck", "--disableTelemetry", *(["--loose"] if loose else []),
        ]  # fmt: skip
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, start_new_session=True
            )
        server = cls(f"http://127.0.0.1:{port}/{ACCOUNT}", process, data_dir, log_path)
        try:
            server._wait_until_serving(timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_until_serving(self, timeout: float) -> None:
        """Until the account's container listing answers 200 to a signed request (an unsigned one is refused)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Azurite exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                if self.request("GET", "", query={"comp": "list"}, timeout=2).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Azurite not ready after {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    @property
    def connection_string(self) -> str:
        """As Azure's SDKs and tools read AZURE_STORAGE_CONNECTION_STRING (its BlobEndpoint wins over the account)."""
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
                f"BlobEndpoint={self.endpoint};")  # fmt: skip

    def env(self) -> dict[str, str]:
        """The variables that reach this server."""
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string}

    def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        key: str = ACCOUNT_KEY,
        timeout: float = 30.0,
    ) -> Reply:
        """One request signed with SharedKey (`path` is CONTAINER[/BLOB], unquoted; "" for the account), its reply
        whatever its status. Tests seed data with it, and read what the service says in plain HTTP."""
        headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": API_VERSION, **(headers or {})}
        if body or method in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
            headers.setdefault("Content-Type", "application/octet-stream")  # else urllib adds a form type, unsigned
        url_path = urllib.parse.urlsplit(self.endpoint).path + ("/" + urllib.parse.quote(path) if path else "")
        headers["Authorization"] = f"SharedKey {ACCOUNT}:{_signature(method, url_path, headers, query or {}, key)}"
        url = urllib.parse.urlsplit(self.endpoint)._replace(path=url_path, query=urllib.parse.urlencode(query or {}))
        request = urllib.request.Request(url.geturl(), data=body or None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return Reply(reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())

    def create_container(self, name: str) -> None:
        reply = self.request("PUT", name, query={"restype": "container"})
        if reply.status != 201:
            raise RuntimeError(f"creating container {name}: {reply.status} {reply.body[:300]!r}")

    def put_blob(self, container: str, name: str, body: bytes) -> Reply:
        """A block blob put in one request (the service records its Content-MD5)."""
        reply = self.request("PUT", f"{container}/{name}", body, headers={"x-ms-blob-type": "BlockBlob"})
        if reply.status != 201:
            raise RuntimeError(f"putting {container}/{name}: {reply.status} {reply.body[:300]!r}")
        return reply

    def extent_files(self) -> list[Path]:
        """The files holding the blobs' bytes (several blobs to a file, at offsets its database records)."""
        return sorted((self.data_dir / "data" / "__blobstorage__").iterdir())

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Azurite:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _signature(method: str, url_path: str, headers: dict[str, str], query: dict[str, str], key: str) -> str:
    """SharedKey's signature: the standard headers in their order (a zero Content-Length as empty), the x-ms-*
    headers sorted, then the resource: /ACCOUNT, the URL's path (which starts with the account again on the
    emulator's path-style URLs) and each query parameter on a line of its own."""
    lower = {name.lower(): value for name, value in headers.items()}
    standard = [lower.get(name.lower(), "") for name in _SIGNED_HEADERS]
    if standard[2] == "0":
        standard[2] = ""
    ms = [f"{name}:{value.strip()}" for name, value in sorted(lower.items()) if name.startswith("x-ms-")]
    resource = f"/{ACCOUNT}{url_path}" + "".join(f"\n{name.lower()}:{value}" for name, value in sorted(query.items()))
    text = "\n".join([method, *standard, *ms, resource])
    digest = hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
