"""Source registry: scheme -> Source. Each source module is imported only when its scheme is used."""

from __future__ import annotations

from initializers.contract import Config, Kind
from initializers.errors import ConfigError
from initializers.sources.base import Source
from initializers.uris import scheme_of


def open_source(config: Config, kind: Kind) -> Source:
    uri = config.require_storage_uri()
    scheme = scheme_of(uri, kind)
    if scheme == "s3":
        from initializers.sources.s3 import S3Source

        return S3Source.from_config(uri, config)
    raise ConfigError(f"STORAGE_URI: the {scheme}:// source is not implemented yet; use s3:// for now")
