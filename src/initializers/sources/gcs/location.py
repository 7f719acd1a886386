"""Where in Cloud Storage `STORAGE_URI` points: `gs://BUCKET[/PREFIX]`, a folder-like prefix, or one object."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked
from initializers.config.uris import folder_prefix

#: Google's bucket naming rules: 3-63 characters (up to 222 with dots, each dot-separated part at most 63).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


@dataclass(frozen=True)
class GcsLocation:
    """A bucket, and a prefix or object name in it ("" for the whole bucket)."""

    bucket: str
    name: str

    USAGE: ClassVar[str] = "gs://BUCKET[/PREFIX]"

    @classmethod
    def parse(cls, uri: str) -> GcsLocation:
        bucket, _, name = uri.partition("://")[2].partition("/")
        if not bucket:
            raise ConfigError(f"STORAGE_URI: {masked(uri)!r} names no bucket; expected {cls.USAGE}")
        if not _BUCKET.fullmatch(bucket) or any(len(part) > 63 for part in bucket.split(".")) or ".." in bucket:
            raise ConfigError(
                f"STORAGE_URI: {bucket!r} is not a Cloud Storage bucket name (3-63 lowercase letters, digits, '-', "
                "'_' and '.', starting and ending with a letter or digit)"
            )
        return cls(bucket, name.lstrip("/"))

    @property
    def folder_prefix(self) -> str:
        return folder_prefix(self.name)

    def __str__(self) -> str:
        return f"gs://{self.bucket}/{self.name}" if self.name else f"gs://{self.bucket}"
