"""Parsing `STORAGE_URI`: which scheme, and where in that scheme. Pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.contract import Kind
from initializers.errors import ConfigError


def scheme_of(uri: str, kind: Kind) -> str:
    """The URI's scheme, if this kind of program accepts it; otherwise a ConfigError naming the accepted ones."""
    accepted = ", ".join(f"{s}://" for s in kind.schemes)
    scheme, sep, _ = uri.partition("://")
    if not sep or not scheme:
        raise ConfigError(f"STORAGE_URI: {uri!r} is not a URI; the {kind.program} accepts {accepted}")
    scheme = scheme.lower()
    if scheme not in kind.schemes:
        raise ConfigError(
            f"STORAGE_URI: scheme {scheme}:// is not supported by the {kind.program}; it accepts {accepted}"
        )
    return scheme


@dataclass(frozen=True)
class S3Location:
    """`s3://bucket[/prefix]`: a folder-like prefix, or one object when the key names one."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        rest = uri.partition("://")[2]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ConfigError(f"STORAGE_URI: {uri!r} names no bucket; expected s3://BUCKET[/PREFIX]")
        if any(ch.isspace() for ch in bucket) or len(bucket) > 255:
            raise ConfigError(f"STORAGE_URI: {bucket!r} is not a valid bucket name")
        return cls(bucket, key.lstrip("/"))

    @property
    def folder_prefix(self) -> str:
        """The key prefix of the folder this URI names: `data` means `data/`, never `data-old/`."""
        return self.key if not self.key or self.key.endswith("/") else self.key + "/"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"
