"""Source registry: scheme -> Source. Each source module is imported only when its scheme is used."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the contract imports this package's option modules: importing it must cost nothing
    from initializers.contract import Config, Kind
    from initializers.sources.base import Source


def open_source(config: Config, kind: Kind, staging: str) -> Source:
    """The source for STORAGE_URI; `staging` is a folder it may keep resumable bookkeeping in."""
    from initializers.uris import scheme_of

    uri = config.require_storage_uri()
    scheme = scheme_of(uri, kind)
    if scheme == "s3":
        from initializers.sources.s3 import S3Source

        return S3Source.from_config(uri, config)
    if scheme == "hf":
        from initializers.sources.hf import HfSource

        return HfSource.from_config(uri, config, kind, staging)
    from initializers.sources.iceberg import IcebergSource  # cache://, the only scheme left

    return IcebergSource.from_config(uri, config)


def plan_share(config: Config, kind: Kind) -> tuple[int, int] | None:
    """The share (index, count) of a plan split over several initializers that this run fetches; None when not
    split. hf:// and s3:// plans are split by the job; the cache source shards the table by itself."""
    from initializers.uris import scheme_of

    return None if scheme_of(config.require_storage_uri(), kind) == "cache" else config.shard()
