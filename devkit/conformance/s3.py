"""The s3:// store's conformance fixture: a bucket on SeaweedFS, behind a relay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from devkit.conformance import Store
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from initializers.sources.s3.source import S3Source


class S3Store(Store):
    """A bucket on SeaweedFS; a relay in front of it."""

    scheme = "s3"
    source = S3Source
    folder_names = True

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        seaweed = request.getfixturevalue("seaweed")
        with Relay(seaweed.endpoint) as relay:
            yield cls(seaweed, request.getfixturevalue("s3"), request.getfixturevalue("bucket"), relay)

    def __init__(self, seaweed: SeaweedFS, s3: Any, bucket: str, relay: Relay) -> None:
        self.seaweed, self.s3, self.bucket, self.relay = seaweed, s3, bucket, relay
        self.prefix = "root"

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            self.change(path, data)

    def change(self, path: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{path}", Body=data)

    def put_folder_named(self, path: str, data: bytes) -> None:
        """Listed and served by the relay: SeaweedFS makes a folder of a key ending in `/`, its bytes dropped."""
        self.relay.injected.setdefault(self.bucket, {})[f"{self.prefix}/{path}"] = data

    def env(self, output: Path) -> dict[str, str]:
        return {**self.seaweed.env(), "ENDPOINT": self.relay.endpoint,
                "STORAGE_URI": f"s3://{self.bucket}/{self.prefix}", "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{self.bucket}/{self.prefix}/{quote(path, safe='/~')}"

    def listing(self) -> tuple[Relay, str]:
        return self.relay, "list-type=2"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """The secret key (its signatures are not secrets)."""
        env = self.env(output)
        return env, [env["SECRET_ACCESS_KEY"]]


FIXTURES = {S3Store.scheme: S3Store}
