"""Unsigned requests, for public buckets and containers: one setting, declared once here for every store whose public
data can be read without an identity (S3 and the cache's tables on S3, Google Cloud Storage, Azure Blob Storage)."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.config.settings import BOOL, setting_field


@dataclass(frozen=True)
class AnonymousAccess:
    anonymous: bool = setting_field(
        "ANONYMOUS",
        "Unsigned requests, for public buckets and containers; never a fallback when credentials fail.",
        BOOL,
        default=False,
    )
