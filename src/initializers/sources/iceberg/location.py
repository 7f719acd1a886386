"""Which Iceberg table `STORAGE_URI` names: `cache://SCHEMA/TABLE`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked


@dataclass(frozen=True)
class CacheLocation:
    """The table Kubeflow's data cache names, only shown (messages, the manifest): its data is found by METADATA_LOC."""

    table: str  # SCHEMA/TABLE

    USAGE: ClassVar[str] = "cache://SCHEMA/TABLE"

    @classmethod
    def parse(cls, uri: str) -> CacheLocation:
        table = uri.partition("://")[2]
        parts = table.split("/")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ConfigError(f"STORAGE_URI: expected {cls.USAGE} (two non-empty names), got {masked(uri)!r}")
        return cls(table)

    def __str__(self) -> str:
        return f"cache://{self.table}"
