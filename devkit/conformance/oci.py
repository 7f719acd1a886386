"""The oci:// store's conformance fixture: an artifact in CNCF Distribution's registry, behind a relay; each put or
change pushes the artifact anew under its tag (each file one layer titled by its path), as `oras push` does."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.conformance import Store
from devkit.malformed import HUGE, MalformedAnswer, as_json, case_maker
from devkit.registry import OCI_EMPTY_CONFIG, OCI_MANIFEST, Registry, digest_of, docker_config
from devkit.relay import EchoFault, Relay, StatusFault
from initializers.sources.oci.source import OciSource

TAG = "v1"


class OciStore(Store):
    """A repository of the registry; the program reaches it through a relay, over plain HTTP (OCI_PLAIN_HTTP)."""

    scheme = "oci"
    source = OciSource

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        registry = request.getfixturevalue("registry")
        with Relay(registry.endpoint) as relay:
            yield cls(registry, f"conformance/c{uuid.uuid4().hex[:12]}", relay)

    def __init__(self, registry: Registry, repository: str, relay: Relay) -> None:
        self.registry, self.repository, self.relay = registry, repository, relay
        self.files: dict[str, bytes] = {}

    def put(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.registry.push_artifact(self.repository, TAG, self.files)

    def change(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.registry.push_artifact(self.repository, TAG, self.files)

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_URI": f"oci://{self.relay.endpoint.partition('://')[2]}/{self.repository}:{TAG}",
                "OCI_PLAIN_HTTP": "true", "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        """A file's bytes are its layer's blob, by the digest of what it holds now."""
        return self.relay, f"/blobs/{digest_of(self.files[path])}"

    def listing(self) -> tuple[Relay, str]:
        """The artifact's manifest, by its tag."""
        return self.relay, f"/manifests/{TAG}"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """The registry's 500, its JSON error."""
        return StatusFault(status=500, times=times, match=match, method=method, body=_error("UNKNOWN", "fault"),
                           content_type="application/json")  # fmt: skip

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """Docker Hub's rate limit: 429 TOOMANYREQUESTS, with Retry-After."""
        return StatusFault(status=429, times=times, match=match, method=method, headers={"Retry-After": "0.3"},
                           body=_error("TOOMANYREQUESTS", "slow down"), content_type="application/json")  # fmt: skip

    def echo_fault(self, status: int, match: str | None) -> EchoFault:
        """The registry's JSON error, the echo as its code and its message."""
        render: Callable[[str], bytes] = lambda text: _error(text, text)  # noqa: E731 - the echo's renderer
        return EchoFault(status=status, match=match, times=None, render=render, content_type="application/json")

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """Basic auth from a Docker config file (DOCKER_CONFIG), for the relay's host."""
        password = "s3cr3tPassw0rdXq7Lm2Np9Rv4"
        host = self.relay.endpoint.partition("://")[2]
        path = docker_config(keys, host, "puller", password)
        auth = json.loads(path.read_text())["auths"][host]["auth"]
        return {**self.env(output), "DOCKER_CONFIG": str(keys)}, [password, auth]

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases a manifest can carry (a layer is a listed file)."""
        case = case_maker(self, as_json, OCI_MANIFEST)

        def manifest(*layers: Any) -> dict[str, Any]:
            config = {"mediaType": OCI_EMPTY_CONFIG, "digest": digest_of(b"{}"), "size": 2}
            return {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x", "config": config,
                    "layers": list(layers)}  # fmt: skip

        def layer(size: Any = 1, **drop: Any) -> dict[str, Any]:
            fields = {"mediaType": "application/octet-stream", "digest": digest_of(b"a"), "size": size,
                      "annotations": {"org.opencontainers.image.title": "a"}}  # fmt: skip
            return {name: value for name, value in fields.items() if name not in drop}

        return {
            "shape": case([], "the manifest is a list, not an object: []"),
            "null": case(None, "the manifest is missing or null"),
            "entry": case(manifest("a"), "a layer is a string, not an object: 'a'"),
            "no-name": case(manifest(layer(digest=None)), "the digest of layer 1 is missing"),
            "huge-size": case(manifest(layer(size=HUGE)), f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
            "negative-size": case(manifest(layer(size=-1)), "is -1 bytes, outside 0 to 2^63 - 1"),
        }


def _error(code: str, message: str) -> bytes:
    """The distribution API's error body."""
    return json.dumps({"errors": [{"code": code, "message": message, "detail": message}]}).encode()


FIXTURES = {OciStore.scheme: OciStore}
