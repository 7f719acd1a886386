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
import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devkit.ports import free_port
from devkit.processes import stop_process_group
from devkit.relay import self_signed_certificate, serving_context
from devkit.serving import NoDelay, ServedInThread, send_json

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
    #: The certificate it serves HTTPS with (its own CA), when it does.
    certificate: Path | None = None

    @classmethod
    def start(
        cls,
        timeout: float = 60.0,
        parent: Path | None = None,
        loose: bool = False,
        oauth: bool = False,
        port: int | None = None,
        tls: bool = False,
    ) -> Azurite:
        """Serve Blob Storage on `port` (else a free one), with the data in a new folder under `parent` (else the temp
        folder), removed by `stop`. Strict by default: a header Azurite does not implement (x-ms-range-get-content-crc64
        among them) is answered 500 FeatureNotSupported; `loose` ignores such headers instead. With `oauth`, it serves
        HTTPS with a self-signed `certificate` and takes Microsoft Entra bearer tokens too (Azurite's basic check:
        issuer, audience and lifetime, not the signature; bearer tokens need HTTPS). `tls` alone: HTTPS with that
        certificate, SharedKey and SAS as ever (clients trust it through SSL_CERT_FILE)."""
        if not AZURITE_BLOB.exists():
            raise RuntimeError(f"{AZURITE_BLOB} is missing: run `make install` (it needs npm)")
        data_dir = Path(tempfile.mkdtemp(prefix="azurite-", dir=parent))
        port = port or free_port()
        log_path = data_dir / "azurite.log"
        command = [
            str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(data_dir / "data"),
            "--silent", "--skipApiVersionCheck", "--disableTelemetry", *(["--loose"] if loose else []),
        ]  # fmt: skip
        certificate = None
        if oauth or tls:
            certificate, key = self_signed_certificate(data_dir)
            command += ["--cert", str(certificate), "--key", str(key)] + (["--oauth", "basic"] if oauth else [])
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, start_new_session=True
            )
        scheme = "https" if certificate else "http"
        server = cls(f"{scheme}://127.0.0.1:{port}/{ACCOUNT}", process, data_dir, log_path, certificate)
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
        return connection_string(self.endpoint)

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
            context = ssl.create_default_context(cafile=self.certificate) if self.certificate else None
            with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
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

    def put_blocks(self, container: str, name: str, parts: list[bytes]) -> None:
        """A block blob staged in blocks and committed from their list: the service records no Content-MD5 for it."""
        ids = [base64.b64encode(f"block-{number:06}".encode()).decode() for number in range(len(parts))]
        for block_id, part in zip(ids, parts, strict=True):
            reply = self.request("PUT", f"{container}/{name}", part, query={"comp": "block", "blockid": block_id})
            if reply.status != 201:
                raise RuntimeError(f"staging a block of {container}/{name}: {reply.status} {reply.body[:300]!r}")
        latest = "".join(f"<Latest>{block_id}</Latest>" for block_id in ids)
        body = f'<?xml version="1.0" encoding="utf-8"?><BlockList>{latest}</BlockList>'.encode()
        reply = self.request("PUT", f"{container}/{name}", body, query={"comp": "blocklist"})
        if reply.status != 201:
            raise RuntimeError(f"committing {container}/{name}: {reply.status} {reply.body[:300]!r}")

    def make_public(self, container: str) -> None:
        """Let anyone list the container and read its blobs, unsigned."""
        reply = self.request(
            "PUT", container, query={"restype": "container", "comp": "acl"},
            headers={"x-ms-blob-public-access": "container"},
        )  # fmt: skip
        if reply.status != 200:
            raise RuntimeError(f"making {container} public: {reply.status} {reply.body[:300]!r}")

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


class IdentityEndpoint:
    """A managed identity's token endpoint on loopback, in App Service's form (which azure-identity reads from
    IDENTITY_ENDPOINT and IDENTITY_HEADER): each GET with the header gets a new JWT for `audience` that lives
    `lifetime` seconds, unsigned (Azurite's basic check reads its issuer, audience and lifetime only)."""

    HEADER = "identity-header-for-tests"

    def __init__(self, lifetime: float = 3600.0, audience: str = "https://storage.azure.com") -> None:
        self.lifetime, self.audience = lifetime, audience
        self.issued: list[str] = []
        server = _IdentityServer(self, 0)  # any free port: the kernel's choice, bound at once
        self._serving = ServedInThread(server, "identity-endpoint", poll_interval=0.05)
        self.endpoint = f"http://127.0.0.1:{server.server_address[1]}/msi/token"

    def env(self) -> dict[str, str]:
        return {"IDENTITY_ENDPOINT": self.endpoint, "IDENTITY_HEADER": self.HEADER}

    def token(self) -> tuple[str, int]:
        """A new token, and when it expires (seconds since the epoch)."""
        now = int(time.time())
        claims = {"aud": self.audience, "iss": "https://sts.windows.net/00000000-0000-0000-0000-000000000000/",
                  "nbf": now - 60, "iat": now - 60, "exp": now + int(self.lifetime),
                  "oid": f"token-{len(self.issued)}"}  # fmt: skip
        parts = ({"typ": "JWT", "alg": "RS256"}, claims)
        encoded = [base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=") for part in parts]
        self.issued.append(".".join([*encoded, "c2lnbmF0dXJlLW5vdC1jaGVja2Vk"]))
        return self.issued[-1], claims["exp"]

    def __enter__(self) -> IdentityEndpoint:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._serving.stop()


class _IdentityServer(NoDelay, ThreadingHTTPServer):
    def __init__(self, identity: IdentityEndpoint, port: int) -> None:
        self.identity = identity
        super().__init__(("127.0.0.1", port), _IdentityHandler)


class _IdentityHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _IdentityServer

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        identity = self.server.identity
        if self.headers.get("X-IDENTITY-HEADER") != identity.HEADER:
            send_json(self, 401, {"error": "no identity header"})
            return
        token, expires_on = identity.token()
        resource = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("resource", [""])[0]
        send_json(self, 200, {"access_token": token, "expires_on": str(expires_on), "resource": resource,
                           "token_type": "Bearer"})  # fmt: skip


class EchoingEntra:
    """Microsoft Entra's token service on loopback over HTTPS (azure-identity sends credentials to https authorities
    only), as an AD FS authority (`AZURE_TENANT_ID=adfs`, which msal trusts without asking
    login.microsoftonline.com): it serves the OpenID configuration, and refuses every token request quoting the body
    it was sent (`client_assertion=...`, `client_secret=...`) back in its error, kept in `sent`. `certificate` is
    the server's, for REQUESTS_CA_BUNDLE."""

    def __init__(self, directory: Path) -> None:
        self.certificate, key = self_signed_certificate(directory)
        self.sent: list[str] = []
        server = _EntraServer(self, 0)
        server.socket = serving_context(self.certificate, key).wrap_socket(server.socket, server_side=True)
        self._serving = ServedInThread(server, "entra-endpoint", poll_interval=0.05)
        self.authority = f"https://127.0.0.1:{server.server_address[1]}"

    def env(self) -> dict[str, str]:
        return {"AZURE_AUTHORITY_HOST": self.authority, "AZURE_TENANT_ID": "adfs",
                "AZURE_CLIENT_ID": "00000000-0000-0000-0000-00000000c1d0",
                "REQUESTS_CA_BUNDLE": str(self.certificate)}  # fmt: skip

    def __enter__(self) -> EchoingEntra:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._serving.stop()


class _EntraServer(NoDelay, ThreadingHTTPServer):
    def __init__(self, entra: EchoingEntra, port: int) -> None:
        self.entra = entra
        super().__init__(("127.0.0.1", port), _EntraHandler)


class _EntraHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _EntraServer

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        base = f"{self.server.entra.authority}/adfs"
        send_json(self, 200, {"issuer": base, "authorization_endpoint": f"{base}/oauth2/authorize",
                              "token_endpoint": f"{base}/oauth2/token"})  # fmt: skip

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.server.entra.sent.append(body)
        send_json(self, 400, {"error": "invalid_client", "error_description": f"you sent {body}"})


def client_certificate(path: Path) -> None:
    """A service principal's certificate as azure-identity reads it: its private key and itself, in one PEM file."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "initializers-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))  # fmt: skip
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    path.write_bytes(pem + certificate.public_bytes(serialization.Encoding.PEM))


def connection_string(endpoint: str, key: str | None = ACCOUNT_KEY) -> str:
    """The development account's connection string with `endpoint` (the server's, or a relay's `/devstoreaccount1`)
    as its BlobEndpoint; without `key`, one that says where and leaves the credential to other variables."""
    credential = f"AccountKey={key};" if key else ""
    return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};{credential}BlobEndpoint={endpoint};"


def account_sas(permissions: str = "rl", expiry: str = "2099-01-01T00:00:00Z", key: str = ACCOUNT_KEY) -> str:
    """An account SAS token for the blob service (version 2019-12-12's string to sign: the account, permissions,
    services, resource types, start, expiry, IP, protocols, version, each on a line), as the portal gives it."""
    fields = {"sv": "2019-12-12", "ss": "b", "srt": "sco", "sp": permissions, "se": expiry, "spr": "https,http"}
    text = "\n".join([ACCOUNT, permissions, "b", "sco", "", expiry, "", "https,http", "2019-12-12", ""])
    signature = base64.b64encode(hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()).decode()
    return urllib.parse.urlencode({**fields, "sig": signature})


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
