"""Parsing `STORAGE_URI`: which scheme, and where in that scheme. Pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import credential_names, masked
from initializers.config import registry
from initializers.config.contract import Kind


def scheme_of(uri: str, kind: Kind) -> str:
    """The scheme of the source that takes the URI: its own, if this kind of program accepts it, or that of an
    accepted source that claims it (the Hub's pages); otherwise a ConfigError naming the accepted ones, and what a
    source takes of the URI's scheme when one claims some of its URIs (`https://`: a Hub page's address)."""
    accepted = ", ".join(f"{s}://" for s in kind.schemes)
    if names := credential_names(uri):
        raise ConfigError(
            f"STORAGE_URI: {masked(uri)!r} carries credentials in its query ({', '.join(names)}): the {kind.program} "
            "reads them from its variables alone (a SAS token from AZURE_STORAGE_SAS_TOKEN, Google's from "
            "GOOGLE_APPLICATION_CREDENTIALS), where they stay out of logs, messages and the manifest"
        )
    scheme, sep, _ = uri.partition("://")
    scheme = scheme.lower()
    if sep and scheme in kind.schemes:
        return scheme
    plugins = registry.plugins_for(kind.schemes)
    claimed = next((plugin.scheme for plugin in plugins if plugin.claims(uri)), None)
    if claimed is not None:
        return claimed
    if not sep or not scheme:
        raise ConfigError(f"STORAGE_URI: {masked(uri)!r} is not a URI; the {kind.program} accepts {accepted}")
    takes = [plugin.claim.usage for plugin in plugins if plugin.claim and scheme in plugin.claim.schemes]
    if takes:
        raise ConfigError(
            f"STORAGE_URI: {masked(uri)!r}: the only {scheme}:// URI the {kind.program} accepts is "
            f"{' or '.join(takes)}; otherwise it accepts {accepted}"
        )
    raise ConfigError(f"STORAGE_URI: scheme {scheme}:// is not supported by the {kind.program}; it accepts {accepted}")


def folder_prefix(key: str) -> str:
    """The key prefix of the folder a bucket URI's key names: `data` means `data/`, never `data-old/`."""
    return key if not key or key.endswith("/") else key + "/"


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
    def place(self) -> str:
        """What is fetched, whatever its version (an object's is its ETag): the URI."""
        return str(self)

    @property
    def folder_prefix(self) -> str:
        return folder_prefix(self.key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"


@dataclass(frozen=True)
class CacheLocation:
    """`cache://SCHEMA/TABLE`: the Iceberg table Kubeflow's data cache names. The name is only shown (messages, the
    manifest): the table's data is found through METADATA_LOC."""

    table: str  # SCHEMA/TABLE

    USAGE: ClassVar[str] = "cache://SCHEMA/TABLE"

    @classmethod
    def parse(cls, uri: str) -> CacheLocation:
        table = uri.partition("://")[2]
        parts = table.split("/")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ConfigError(f"STORAGE_URI: expected {cls.USAGE} (two non-empty names), got {masked(uri)!r}")
        return cls(table)

    @property
    def place(self) -> str:
        """What is fetched, whatever its snapshot: the URI."""
        return str(self)

    def __str__(self) -> str:
        return f"cache://{self.table}"
