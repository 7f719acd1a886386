"""A real container registry on loopback: CNCF Distribution (Debian's `docker-registry`, which `make install` puts in
/usr/bin without starting its service), over plain HTTP, its blobs on disk (`blob_file`), with basic auth (htpasswd,
`users`) when asked; content pushed with the distribution API's own calls (`push_artifact`: blobs, then a manifest),
as ORAS pushes an artifact. Distribution answers an OCI manifest `MANIFEST_UNKNOWN` unless `Accept` lists its type,
serves a blob's `Range` with 206, and serves a byte flipped in its storage as it is.

`TokenGate` stands in front of it as a registry behind a token service does (GHCR, Docker Hub, Quay): every request
without the bearer token it issues is answered 401 with a `WWW-Authenticate: Bearer realm=...,service=...,scope=...`
challenge, its realm (`/token`) issues the token, anonymously, and what carries it is passed to the registry.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.ports import free_port
from devkit.processes import installed_binary, stop_process_group, wait_until_serving

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
TITLE = "org.opencontainers.image.title"
#: ORAS's artifact type for a file pushed without one.
ORAS_ARTIFACT = "application/vnd.unknown.artifact.v1"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Registry:
    endpoint: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    home: Path
    #: (user, password) pushes are made with, when the registry checks basic auth.
    login: tuple[str, str] | None = None

    @classmethod
    def start(cls, users: dict[str, str] | None = None, timeout: float = 60.0) -> Registry:
        """Distribution on a free loopback port over a new folder; `users` (name -> password): basic auth required."""
        binary = installed_binary("docker-registry", "Debian's docker-registry (make install)")
        home = Path(tempfile.mkdtemp(prefix="registry-"))
        port = free_port()
        auth = ""
        if users:
            (home / "htpasswd").write_text("".join(f"{user}:{_bcrypt(password)}\n" for user, password in users.items()))
            auth = f"auth:\n  htpasswd:\n    realm: devkit\n    path: {home / 'htpasswd'}\n"
        (home / "config.yml").write_text(
            f"version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {home / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{port}\n{auth}"
        )
        log_path = home / "registry.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [binary, "serve", str(home / "config.yml")], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        login = next(iter(users.items())) if users else None
        server = cls(f"http://127.0.0.1:{port}", process, home, login)
        try:
            # /v2/ answers 200, or 401 with auth: its health endpoint answers 200 either way.
            wait_until_serving(process, f"{server.endpoint}/", log_path, "docker-registry", timeout)
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def host(self) -> str:
        """`127.0.0.1:PORT`, as an oci:// URI names the registry."""
        return self.endpoint.partition("://")[2]

    def push_blob(self, repository: str, data: bytes) -> str:
        """`data` as a blob of `repository` (a monolithic upload); its digest."""
        digest = digest_of(data)
        started = self._call("POST", f"/v2/{repository}/blobs/uploads/", b"")
        location = started.headers["Location"]
        where = location if location.startswith("http") else self.endpoint + location
        separator = "&" if "?" in where else "?"
        self._call("PUT", f"{where}{separator}digest={digest}", data, "application/octet-stream")
        return digest

    def push_manifest(self, repository: str, reference: str, manifest: dict[str, Any]) -> str:
        """`manifest` under `reference` (a tag), as its own media type; its digest."""
        body = json.dumps(manifest).encode()
        self._call("PUT", f"/v2/{repository}/manifests/{reference}", body, manifest["mediaType"])
        return digest_of(body)

    def push_artifact(
        self, repository: str, tag: str, files: dict[str, bytes], layer_type: str = OCI_LAYER, **manifest: Any
    ) -> str:
        """An ORAS artifact of `files`, each one layer titled by its path; `manifest`: fields to add or replace
        (`artifactType`, `config`; None leaves one out); its manifest's digest."""
        config = self.push_blob(repository, b"{}")
        layers = [
            {"mediaType": layer_type, "digest": self.push_blob(repository, data), "size": len(data),
             "annotations": {TITLE: path}}
            for path, data in files.items()
        ]  # fmt: skip
        document = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": ORAS_ARTIFACT,
            "config": {"mediaType": OCI_EMPTY_CONFIG, "digest": config, "size": 2},
            "layers": layers,
            **manifest,
        }
        return self.push_manifest(
            repository, tag, {name: value for name, value in document.items() if value is not None}
        )

    def blob_file(self, digest: str) -> Path:
        """Where the registry keeps a blob's bytes."""
        algorithm, _, hexdigest = digest.partition(":")
        return self.home / "data" / "docker/registry/v2/blobs" / algorithm / hexdigest[:2] / hexdigest / "data"

    def _call(self, method: str, path: str, body: bytes, content_type: str | None = None) -> Any:
        url = path if path.startswith("http") else self.endpoint + path
        request = urllib.request.Request(url, data=body, method=method)
        if content_type:
            request.add_header("Content-Type", content_type)
        if self.login:
            request.add_header("Authorization", "Basic " + base64.b64encode(":".join(self.login).encode()).decode())
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()
            return reply

    def stop(self) -> None:
        stop_process_group(self.process)
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _bcrypt(password: str) -> str:
    """An htpasswd entry's hash: bcrypt, as Distribution reads them (libxcrypt's, through Python's crypt)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))


def docker_config(folder: Path, host: str, user: str, password: str) -> Path:
    """A Docker config file (`config.json`, as a `kubernetes.io/dockerconfigjson` Secret holds it) in `folder`, with
    `host`'s credentials; the folder is what DOCKER_CONFIG names."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    path = folder / "config.json"
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


@dataclass
class TokenGate:
    """A registry behind a token service: requests without the issued bearer token are challenged (401); `/token`
    issues it, recording the `scope` each request for it asked for (`scopes`)."""

    upstream: str
    token: str
    #: False: the token it issues is refused all the same (a token service that grants no pull).
    honoured: bool = True
    #: What `/token` answers in place of `{"token": TOKEN}` (a token service's hostile answer); None: that.
    answer: bytes | None = None
    endpoint: str = ""
    scopes: list[str] = field(default_factory=list)
    _server: http.server.ThreadingHTTPServer | None = None

    def __enter__(self) -> TokenGate:
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/token?"):
                    from urllib.parse import parse_qs, urlsplit

                    gate.scopes += parse_qs(urlsplit(self.path).query).get("scope", [])
                    issued = json.dumps({"token": gate.token}).encode()
                    self._answer(200, issued if gate.answer is None else gate.answer, {})
                elif self.headers.get("Authorization") != f"Bearer {gate.token}" or not gate.honoured:
                    challenge = (
                        f'Bearer realm="{gate.endpoint}/token",service="devkit",'
                        f'scope="repository:{re.split("/(?:manifests|blobs)/", self.path[len("/v2/") :])[0]}:pull"'
                    )
                    body = b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'
                    self._answer(401, body, {"WWW-Authenticate": challenge})
                else:
                    self._pass()

            def _pass(self) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "host")}
                request = urllib.request.Request(gate.upstream + self.path, headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        self._answer(reply.status, reply.read(), dict(reply.headers))
                except urllib.error.HTTPError as error:
                    self._answer(error.code, error.read(), dict(error.headers))

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def host(self) -> str:
        return self.endpoint.partition("://")[2]

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
