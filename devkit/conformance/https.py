"""The https:// store's conformance fixture: files on nginx, behind a relay that terminates TLS, each case's one file
(the store's URI names one) fetched by its URL, its SHA-256 pinned in the fragment (nginx vouches for no digest)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from devkit.conformance import Store
from devkit.malformed import HUGE, MalformedAnswer
from devkit.nginx import Nginx
from devkit.relay import CorruptFault, Relay, StatusFault, self_signed_certificate
from initializers.sources.web.source import WebSource

#: What a presigned URL's query carries (S3's form), and the credentials sent in HTTP_HEADERS.
_SIGNATURE = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
_CREDENTIAL = "AKIAWEBCONFORMANCE7Q/20261208/us-east-1/s3/aws4_request"
_TOKEN = "hf_WebBearer5Jq8Lz3Xw9Vm2Kp7Rt4Nd6Gs1Hc0"
_API_KEY = "k3yW3b9Qx7Lm2Zp8Rt5Vw1"


class WebStore(Store):
    """Files under a folder of their own on nginx; a relay in front of it serving HTTPS, which the program trusts
    through SSL_CERT_FILE. The file the program fetches is the first one put (a case puts one: `lists`)."""

    scheme = "https"
    source = WebSource
    lists = False

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        nginx = request.getfixturevalue("nginx")
        certificate = self_signed_certificate(tmp)
        with Relay(nginx.endpoint, tls=certificate) as relay:
            yield cls(nginx, f"conformance-{uuid.uuid4().hex[:12]}", relay, certificate[0])

    def __init__(self, nginx: Nginx, folder: str, relay: Relay, certificate: Path) -> None:
        self.nginx, self.folder, self.relay, self.certificate = nginx, folder, relay, certificate
        self.path: str | None = None
        self.held: dict[str, bytes] = {}

    def put(self, files: dict[str, bytes]) -> None:
        """Each file at its path; the first is the one the URI names."""
        self.path = next(iter(files))
        super().put(files)

    def change(self, path: str, data: bytes) -> None:
        self.nginx.put(f"{self.folder}/{path}", data)
        self.held[path] = data

    def url(self, query: str = "") -> str:
        """The URL of the file the URI names, its SHA-256 as it is now pinned."""
        assert self.path is not None, "nothing put"
        pinned = hashlib.sha256(self.held[self.path]).hexdigest()
        return f"{self.relay.endpoint}/{self.folder}/{quote(self.path)}{query}#sha256={pinned}"

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_URI": self.url(), "OUTPUT_PATH": str(output), "SSL_CERT_FILE": str(self.certificate)}

    def landed(self, output: Path) -> dict[str, bytes]:
        """The one file, under the path it was put at (it lands under its name)."""
        return {self.path if path == self.path.rpartition("/")[2] else path: data
                for path, data in super().landed(output).items()} if self.path else {}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{self.folder}/{quote(path)}"

    def listing(self) -> tuple[Relay, str]:
        """The probe of the file (a GET of its first byte) is all the listing there is: any request of the folder."""
        return self.relay, f"/{self.folder}/"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def flip_fault(self, match: str) -> CorruptFault:
        """The first answer carrying the file's bytes after the probe's (whose one byte is read and dropped)."""
        return CorruptFault(match=match, times=1, after=1)

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """A presigned URL (S3's query) and a bearer token and an API key in HTTP_HEADERS, all on the wire."""
        credential = quote(_CREDENTIAL, safe="")
        query = f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={credential}&X-Amz-Signature={_SIGNATURE}"
        headers = {"Authorization": f"Bearer {_TOKEN}", "X-Api-Key": _API_KEY}
        env = {**self.env(output), "STORAGE_URI": self.url(query), "HTTP_HEADERS": json.dumps(headers)}
        return env, [_SIGNATURE, _CREDENTIAL, _TOKEN, _API_KEY]

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases its one answer about the file (the probe's Content-Range) can carry: a size no file has."""
        relay, match = self.listing()
        return {
            "huge-size": _ProbeAnswer(relay, match, b"x", f"is {HUGE} bytes, outside 0 to 2^63 - 1", range_of=HUGE),
            "negative-size": _ProbeAnswer(relay, match, b"x", "not a byte count: '-1'", range_of=-1),
        }


@dataclass(frozen=True)
class _ProbeAnswer(MalformedAnswer):
    """The probe of the file answered, in the server's place, with its first byte of a file of `range_of` bytes."""

    range_of: int = 0

    def fault(self) -> StatusFault:
        headers = {"Content-Range": f"bytes 0-0/{self.range_of}"}
        return StatusFault(status=206, times=None, match=self.match, body=self.body, headers=headers,
                           content_type="application/octet-stream")  # fmt: skip


class UnpinnedWebStore(WebStore):
    """The same files by URLs that pin no digest: nginx vouches for none either, so each file is checked by its size
    and pinned to its ETag (If-Match) alone, and recorded as `size+version`."""

    findings = {  # noqa: RUF012 - the base class's declared type
        "flip": "a byte flipped in transit lands: with no digest pinned nor sent, the size and the ETag are all there "
        "is to check (docs/durability.md, what each store vouches for)"
    }

    @property
    def verifies_content(self) -> bool:
        return False

    def url(self, query: str = "") -> str:
        return super().url(query).partition("#")[0]


FIXTURES = {WebStore.scheme: WebStore, f"{WebStore.scheme}-unpinned": UnpinnedWebStore}
