"""The gs:// store's conformance fixture: a bucket on fake-gcs-server, behind a relay."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from devkit.conformance import ISSUED_TOKEN, TOKEN_PATH, Store
from devkit.fake_gcs import FakeGCS
from devkit.malformed import HUGE, ONE, OUTSIDE, MalformedAnswer, as_json, case_maker
from devkit.relay import EchoFault, Relay, StatusFault
from initializers.sources.gcs.source import GcsSource

#: Cloud Storage's JSON error, its reason to fill in.
_GCS_ERROR = b'{"error": {"code": 0, "message": "conformance fault", "errors": [{"reason": "%s"}]}}'


class GcsStore(Store):
    """A bucket on fake-gcs-server (Google's JSON API); a relay in front of it, which STORAGE_EMULATOR_HOST names."""

    scheme = "gs"
    source = GcsSource
    folder_names = True
    token_endpoint = True
    prefix = "root"

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        gcs = request.getfixturevalue("fake_gcs")
        with Relay(gcs.endpoint) as relay:
            yield cls(gcs, f"conformance-{uuid.uuid4().hex[:12]}", relay)

    def __init__(self, gcs: FakeGCS, bucket: str, relay: Relay) -> None:
        self.gcs, self.bucket, self.relay = gcs, bucket, relay
        gcs.create_bucket(bucket)

    def change(self, path: str, data: bytes) -> None:
        self.gcs.put_object(self.bucket, f"{self.prefix}/{path}", data)

    def put_folder_named(self, path: str, data: bytes) -> None:
        """Listed by the relay in the server's place, the server's own listing with the object added: fake-gcs-server
        keeps objects as files, so a name ending in `/` is a folder there. Its checksum is never read: an empty one
        is skipped, one with bytes refused."""
        listing = self.gcs.listing(self.bucket, f"{self.prefix}/")
        item = {"name": f"{self.prefix}/{path}", "size": str(len(data)), "generation": "1", "crc32c": "AAAAAA=="}
        listing.setdefault("items", []).append(item)
        body = json.dumps(listing).encode()
        _, match = self.listing()
        json_type = "application/json"
        self.relay.add_fault(StatusFault(status=200, times=None, match=match, body=body, content_type=json_type))

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.relay.endpoint, "STORAGE_URI": f"gs://{self.bucket}/{self.prefix}",
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        """An object's bytes come from its media URL: its whole name, escaped, then `?alt=media`."""
        return self.relay, f"/o/{quote(f'{self.prefix}/{path}', safe='')}?alt=media"

    def listing(self) -> tuple[Relay, str]:
        """The bucket's objects: `/o` with a query, where an object's own requests name it (`/o/<name>`)."""
        return self.relay, f"/b/{self.bucket}/o?"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """Cloud Storage's 500, a JSON error."""
        return StatusFault(status=500, times=times, match=match, method=method, body=_GCS_ERROR % b"backendError",
                           content_type="application/json")  # fmt: skip

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """Cloud Storage's rate limit: 429 rateLimitExceeded, with Retry-After."""
        return StatusFault(status=429, times=times, match=match, method=method, headers={"Retry-After": "0.3"},
                           body=_GCS_ERROR % b"rateLimitExceeded", content_type="application/json")  # fmt: skip

    def echo_fault(self, status: int, match: str | None) -> EchoFault:
        """Cloud Storage's JSON error, the echo as its message and its reason."""
        return EchoFault(status=status, match=match, times=None, render=_gcs_error(status),
                         content_type="application/json")  # fmt: skip

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """A service-account key whose token endpoint is the relay's `TOKEN_PATH` (google-auth sends it a signed
        assertion, then the token on every request)."""
        env = self.env(output)
        key, pem = _service_account_key(self.relay.endpoint + TOKEN_PATH)
        path = keys / "key.json"
        path.write_text(json.dumps(key))
        del env["STORAGE_EMULATOR_HOST"]
        return {**env, "GCS_ENDPOINT": self.relay.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(path)}, [
            pem, *pem.splitlines()[1:-1], ISSUED_TOKEN]  # fmt: skip

    def token_fault(self) -> StatusFault:
        """The relay answering its `TOKEN_PATH` as Google's token endpoint does, with `ISSUED_TOKEN`."""
        answer = json.dumps({"access_token": ISSUED_TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
        return StatusFault(status=200, match=TOKEN_PATH, times=None, body=answer, content_type="application/json")

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases its JSON listing and object heads can carry."""
        case = case_maker(self, as_json, "application/json")

        def item(name: Any = f"{self.prefix}/a", size: Any = "1") -> dict[str, Any]:
            return {"name": name, "size": size, "generation": "1", "crc32c": "AAAAAA=="}

        one = f"{self.prefix}/{ONE}"
        return {
            "shape": case([], "a page is a list, not an object: []"),
            "null": case(None, "a page is missing or null"),
            "entry": case({"items": ["a"]}, "an item of a page is a string, not an object: 'a'"),
            "no-name": case({"items": [{k: v for k, v in item().items() if k != "name"}]}, "an item's name is missing"),
            "huge-size": case({"items": [item(size=str(HUGE))]}, f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
            "negative-size": case({"items": [item(size="-1")]}, "not a byte count: '-1'"),
            "outside-prefix": case({"items": [item(OUTSIDE)]}, f"it lists {OUTSIDE!r}, which is not under the prefix"),
            "token": case({"items": [item()], "nextPageToken": ["t"]}, "a page's nextPageToken is a list, not a name"),
            "head": case(
                item(one, size=str(HUGE)),
                f"is {HUGE} bytes",
                match=f"/o/{quote(one, safe='')}?fields",
                uri=f"gs://{self.bucket}/{one}",
            ),
        }


def _gcs_error(status: int) -> Callable[[str], bytes]:
    """Cloud Storage's JSON error, the echo as its message and its reason."""
    return lambda text: json.dumps(
        {"error": {"code": status, "message": text, "errors": [{"reason": text, "message": text}]}}
    ).encode()


def _service_account_key(token_uri: str) -> tuple[dict[str, str], str]:
    """A service-account key with a fresh RSA key, its token endpoint at `token_uri`; and its private key (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    text = pem.decode()
    key_file = {"type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": text,
                "client_email": "r@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}  # fmt: skip
    return key_file, text


FIXTURES = {GcsStore.scheme: GcsStore}
