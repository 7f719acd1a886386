"""The s3:// store's conformance fixture: a bucket on SeaweedFS, behind a relay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from devkit.conformance import Store
from devkit.malformed import HUGE, ONE, OUTSIDE, MalformedAnswer, case_maker
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

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases its ListObjectsV2 answers (XML) can carry."""

        def page(contents: str, more: str = "<IsTruncated>false</IsTruncated>") -> bytes:
            return (
                '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"{more}{contents}</ListBucketResult>"
            ).encode()

        def entry(key: str, size: object) -> str:
            return f"<Contents><Key>{key}</Key><Size>{size}</Size><ETag>&quot;e&quot;</ETag></Contents>"

        case = case_maker(self, bytes, "application/xml")

        prefix = f"{self.prefix}/"
        return {
            "shape": case(b"<Error><Code>NoSuchKey</Code></Error>", "not a <ListBucketResult>"),
            "entry": case(page("<Contents>x</Contents>"), "the Key of an entry is missing"),
            "no-name": case(page("<Contents><Size>1</Size></Contents>"), "the Key of an entry is missing"),
            "huge-size": case(page(entry(f"{prefix}a", HUGE)), f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
            "negative-size": case(page(entry(f"{prefix}a", -1)), "not a byte count: '-1'"),
            "outside-prefix": case(page(entry(OUTSIDE, 1)), f"it lists {OUTSIDE!r}, which is not under the prefix"),
            "token": case(page(entry(f"{prefix}a", 1), "<IsTruncated>true</IsTruncated>"), "no NextContinuationToken"),
            "head": case(
                page(entry(f"{prefix}{ONE}", HUGE)),
                f"is {HUGE} bytes",
                match="max-keys=1&",
                uri=f"s3://{self.bucket}/{prefix}{ONE}",
            ),
        }


FIXTURES = {S3Store.scheme: S3Store}
