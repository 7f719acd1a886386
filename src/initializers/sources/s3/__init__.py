"""The s3:// source: listing pages (`listing`), cut into key ranges listed at once, and the source itself (`source`),
on the AWS access it shares with the cache source (`sources.aws`: credentials, SigV4, the bucket's signed GETs). This
face registers it; the rest is imported when an s3:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin, register
from initializers.config.signing import SigningOptions
from initializers.config.uris import S3Location
from initializers.sources.aws.options import BOTOCORE_VARIABLES, AwsOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.s3.source import S3Source

    return S3Source.from_config(uri, config)


register(
    SourcePlugin(
        "s3",
        S3Location.USAGE,
        (AwsOptions, AnonymousAccess, SigningOptions),
        lambda uri, _kind: S3Location.parse(uri),
        _open,
        also_reads=BOTOCORE_VARIABLES,
    ),
    Config.shared_settings(),
)
