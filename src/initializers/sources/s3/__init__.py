"""The s3:// source: listing pages (`listing`) and the source (`source`), on the AWS access it shares with the cache
(`sources.aws`). This face declares it (`PLUGIN`); the rest is imported when an s3:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.sources.aws.options import BOTOCORE_VARIABLES, AwsOptions
from initializers.sources.s3.location import S3Location


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.s3.source import S3Source

    return S3Source.from_config(uri, config)


#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "s3",
    S3Location.USAGE,
    (AwsOptions, AnonymousAccess, SigningOptions),
    lambda uri, _kind: S3Location.parse(uri),
    _open,
    also_reads=BOTOCORE_VARIABLES,
)
