"""Where in S3 `STORAGE_URI` points: `s3://BUCKET[/PREFIX]`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked
from initializers.config.uris import folder_prefix


@dataclass(frozen=True)
class S3Location:
    """`s3://bucket[/prefix]`: a folder-like prefix, or one object when the key names one."""

    bucket: str
    key: str

    USAGE: ClassVar[str] = "s3://BUCKET[/PREFIX]"

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        rest = uri.partition("://")[2]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ConfigError(f"STORAGE_URI: {masked(uri)!r} names no bucket; expected {cls.USAGE}")
        if any(ch.isspace() for ch in bucket) or len(bucket) > 255:
            raise ConfigError(f"STORAGE_URI: {bucket!r} is not a valid bucket name")
        return cls(bucket, key.lstrip("/"))

    @property
    def folder_prefix(self) -> str:
        return folder_prefix(self.key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"
