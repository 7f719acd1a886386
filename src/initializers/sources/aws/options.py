"""How to reach S3 (`access`): the settings the S3 and cache sources count among their option groups and read as
`config.options(AwsOptions)`, and the variables botocore reads itself."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.config.settings import choice, setting_field

REQUESTER = choice("requester")

#: The endpoint variables botocore reads for S3, S3's own first: an unset ENDPOINT falls back to them (`access`).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: botocore's own: the credential chain, profiles, region, CA bundle, endpoint (both sources' `also_reads`).
BOTOCORE_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
                      "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                      *ENDPOINT_VARIABLES)  # fmt: skip


@dataclass(frozen=True)
class AwsOptions:
    endpoint: str | None = setting_field(
        "ENDPOINT",
        "S3 endpoint URL for S3-compatible storage (path-style addressing); else AWS_ENDPOINT_URL_S3, else "
        "AWS_ENDPOINT_URL, as botocore reads them.",
    )
    access_key_id: str | None = setting_field(
        "ACCESS_KEY_ID", "S3 access key id (else boto3's standard chain).", habits=("ACCESS_KEY",)
    )
    secret_access_key: str | None = setting_field(
        "SECRET_ACCESS_KEY", "S3 secret access key.", secret=True, habits=("SECRET_KEY",)
    )
    region: str | None = setting_field("REGION", "S3 region.")
    role_arn: str | None = setting_field("ROLE_ARN", "IAM role to assume via STS on top of the resolved credentials.")
    request_payer: str | None = setting_field(
        "REQUEST_PAYER", "'requester': agree to pay for requests to a Requester Pays bucket.", REQUESTER
    )
