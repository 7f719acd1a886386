"""Parsing `STORAGE_URI`: which scheme, and where in that scheme. Pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from initializers.common.errors import ConfigError
from initializers.config.contract import Kind


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


@dataclass(frozen=True)
class HfLocation:
    """`hf://OWNER/NAME[@REVISION][/SUB/PATH]`; a revision containing `/` is written `%2F`."""

    repo_id: str
    revision: str | None
    sub_path: str  # "" for the whole repo

    @classmethod
    def parse(cls, uri: str) -> HfLocation:
        expected = "expected hf://OWNER/NAME[@REVISION][/PATH]"
        owner, _, rest = uri.partition("://")[2].partition("/")
        name_and_revision, _, sub_path = rest.partition("/")
        name, at, revision = name_and_revision.partition("@")
        if not owner or not name:
            raise ConfigError(f"STORAGE_URI: {uri!r} names no repository; {expected}")
        if at and not revision:
            raise ConfigError(f"STORAGE_URI: {uri!r} has an empty revision after '@'; {expected}")
        segments = sub_path.split("/") if sub_path else []
        if any(segment in ("", ".", "..") for segment in segments[:-1]) or (segments and segments[-1] in (".", "..")):
            raise ConfigError(f"STORAGE_URI: {uri!r} has an empty, '.' or '..' segment in its path; {expected}")
        for part in (owner, name):
            if any(ch.isspace() for ch in part) or part in (".", ".."):
                raise ConfigError(f"STORAGE_URI: {part!r} is not a valid repository owner or name; {expected}")
        return cls(f"{owner}/{name}", unquote(revision) if revision else None, sub_path.rstrip("/"))

    def __str__(self) -> str:
        revision = f"@{quote(self.revision, safe='')}" if self.revision else ""
        return f"hf://{self.repo_id}{revision}" + (f"/{self.sub_path}" if self.sub_path else "")


@dataclass(frozen=True)
class CacheLocation:
    """`cache://SCHEMA/TABLE`: the Iceberg table Kubeflow's data cache names. The name is only shown (messages, the
    manifest): the table's data is found through METADATA_LOC."""

    table: str  # SCHEMA/TABLE

    @classmethod
    def parse(cls, uri: str) -> CacheLocation:
        table = uri.partition("://")[2]
        parts = table.split("/")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ConfigError(f"STORAGE_URI: expected cache://SCHEMA/TABLE (two non-empty names), got {uri!r}")
        return cls(table)

    def __str__(self) -> str:
        return f"cache://{self.table}"
