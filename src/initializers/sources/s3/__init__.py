"""The s3:// source: credentials and AWS access (`aws`), SigV4 signing, listing pages, ranged GETs, and the
source itself (`source`). This face registers it; the rest is imported when an s3:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin, register
from initializers.config.signing import SigningOptions
from initializers.config.uris import S3Location
from initializers.sources.s3.options import AwsOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.s3.source import S3Source

    return S3Source.from_config(uri, config)


#: botocore's own: the credential chain, profiles, region, CA bundle.
ALSO_READS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
              "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")  # fmt: skip

register(
    SourcePlugin(
        "s3",
        S3Location.USAGE,
        (AwsOptions, SigningOptions),
        lambda uri, _kind: S3Location.parse(uri),
        _open,
        also_reads=ALSO_READS,
    ),
    Config.shared_settings(),
)
