"""The hf:// store's conformance fixture: a dataset repo on our Hub server, behind relays."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from devkit.conformance import Store
from devkit.hubserver import ALL_REPOS, HubServer
from devkit.malformed import HUGE, OUTSIDE, MalformedAnswer, as_json, case_maker
from devkit.relay import EchoFault, Relay, StatusFault
from initializers.sources.hub.source import HfSource

#: The Hub's error body, as the Hub answers (JSON).
_HUB_ERROR = b'{"error": "conformance fault"}'
_HUB_TOKEN = "hf_EchoedHubToken4Kx9Pq2Wz7Lm3Rt8"


class HubStore(Store):
    """A dataset repo on our Hub server; relays in front of its API origin and its CDN (where LFS files come from)."""

    scheme = "hf"
    source = HfSource
    repo = "org/conformance"

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        with HubServer() as hub, Relay(hub.endpoint) as api, Relay(hub.cdn_endpoint) as cdn:
            yield cls(hub, api, cdn)

    def __init__(self, hub: HubServer, api: Relay, cdn: Relay) -> None:
        self.hub, self.api, self.cdn = hub, api, cdn
        hub.cdn_public_endpoint = cdn.endpoint
        self._made = False

    def put(self, files: dict[str, bytes]) -> None:
        if self._made:
            self.hub.commit(self.repo, dict(files), repo_type="dataset")
        else:
            self.hub.add_repo(self.repo, files, repo_type="dataset")
            self._made = True

    def change(self, path: str, data: bytes) -> None:
        self.hub.commit(self.repo, {path: data}, repo_type="dataset")

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_URI": f"hf://datasets/{self.repo}", "HF_ENDPOINT": self.api.endpoint,
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        """LFS files (the suite's `.bin` files) come from the CDN, named in its query; the others from `resolve`."""
        if path.endswith(".bin"):
            return self.cdn, urlencode({"file": path})
        return self.api, f"/resolve/main/{quote(path)}"

    def listing(self) -> tuple[Relay, str]:
        """The repo's tree (its revision is resolved before, as the source opens)."""
        return self.api, "/tree/"

    @property
    def relays(self) -> list[Relay]:
        return [self.api, self.cdn]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """The Hub's 500, a JSON error."""
        return StatusFault(
            status=500, times=times, match=match, method=method, body=_HUB_ERROR, content_type="application/json"
        )

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """The Hub's rate limit: 429 with Retry-After."""
        return StatusFault(status=429, times=times, match=match, method=method, headers={"Retry-After": "0.3"},
                           body=_HUB_ERROR, content_type="application/json")  # fmt: skip

    def echo_fault(self, status: int, match: str | None) -> EchoFault:
        """The Hub's JSON error, its code in X-Error-Code."""
        render = lambda text: json.dumps({"error": text}).encode()  # noqa: E731
        return EchoFault(status=status, match=match, times=None, content_type="application/json", render=render,
                         echo_header="X-Error-Code")  # fmt: skip

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """The Hub's token."""
        self.hub.tokens[_HUB_TOKEN] = {ALL_REPOS}
        return {**self.env(output), "ACCESS_TOKEN": _HUB_TOKEN}, [_HUB_TOKEN]

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases the Hub's tree and revision answers (JSON) can carry."""

        def file(path: Any = "a.txt", size: Any = 1) -> dict[str, Any]:
            return {"type": "file", "path": path, "size": size, "oid": "0" * 40}

        case = case_maker(self, as_json, "application/json")

        wrong = "is not what the Hub's API sends"
        return {
            "shape": case({"path": "a.txt"}, wrong),
            "null": case(None, wrong),
            "entry": case(["a.txt"], wrong),
            "no-name": case([{k: v for k, v in file().items() if k != "path"}], wrong),
            "huge-size": case([file(size=HUGE)], f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
            "negative-size": case([file(size=-1)], "is -1 bytes, outside 0 to 2^63 - 1"),
            "outside-prefix": case(
                [file(OUTSIDE)],
                f"it lists {OUTSIDE!r}, which is not under the prefix 'small/'",
                uri=f"hf://datasets/{self.repo}/small",
            ),
            "head": case([], wrong, match="/revision/"),
        }


FIXTURES = {HubStore.scheme: HubStore}
