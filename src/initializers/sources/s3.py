"""The S3 source: botocore (boto3's core) for credentials, configuration and listing; lean signed GETs for bytes.

Users' credential setups (static keys, AWS_* variables, profiles, web identity / IRSA, an assumed role)
behave exactly as with boto3, because botocore resolves them; only the data requests bypass it.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import botocore.credentials
import botocore.session
from botocore import UNSIGNED
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from initializers.contract import Config
from initializers.errors import ConfigError, FetchError
from initializers.plan import RemoteFile
from initializers.sources.base import Sink, Source
from initializers.sources.s3_get import (
    PROBE_KEY,
    REJECTED_CREDENTIALS,
    GetRequest,
    ObjectEndpoint,
    S3Getter,
    explain_denial,
)
from initializers.sources.sigv4 import SigningCredentials
from initializers.uris import S3Location

DEFAULT_READ_TIMEOUT = 60.0
_DENIED = {"AccessDenied", "403", *REJECTED_CREDENTIALS}


class S3Source(Source):
    part_size = 16 << 20
    default_workers = 8

    def __init__(self, location: S3Location, config: Config) -> None:
        self.location = location
        self._endpoint_url = _checked_endpoint(config.endpoint)
        session = _session(config)
        self._credentials = None if config.anonymous else _resolve_credentials(session)
        self.region = session.get_config_variable("region") or "us-east-1"
        try:
            self._client = session.create_client(
                "s3",
                endpoint_url=config.endpoint,
                region_name=self.region,
                config=BotoConfig(
                    signature_version=UNSIGNED if config.anonymous else None,
                    s3={"addressing_style": "path"} if config.endpoint else None,
                    retries={"mode": "standard", "max_attempts": 5},
                    connect_timeout=10,
                    read_timeout=config.read_timeout or DEFAULT_READ_TIMEOUT,
                ),
            )
        except (BotoCoreError, ValueError) as exc:
            raise ConfigError(f"REGION / ENDPOINT: the S3 client cannot be configured: {exc}") from None
        ca_bundle = session.get_config_variable("ca_bundle")  # AWS_CA_BUNDLE or the profile's ca_bundle
        self._getter = S3Getter(
            ObjectEndpoint.from_object_url(
                self._client.generate_presigned_url("get_object", Params={"Bucket": location.bucket, "Key": PROBE_KEY})
            ),
            self.region,
            self._signing_credentials,
            ssl.create_default_context(cafile=ca_bundle) if ca_bundle else ssl.create_default_context(),
            self._display,
            timeout=config.read_timeout or DEFAULT_READ_TIMEOUT,
        )

    @classmethod
    def from_config(cls, uri: str, config: Config) -> S3Source:
        return cls(S3Location.parse(uri), config)

    def describe(self) -> dict[str, Any]:
        return {"uri": str(self.location), "endpoint": self._endpoint_url, "region": self.region}

    def list_files(self) -> Iterator[RemoteFile]:
        prefix = self.location.folder_prefix
        found = False
        with self._translated_errors():
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.location.bucket, Prefix=prefix
            ):
                for obj in page.get("Contents", ()):
                    key: str = obj["Key"]
                    if key.endswith("/"):  # a "folder marker", not a file
                        continue
                    found = True
                    yield RemoteFile(key[len(prefix) :], obj["Size"], obj["ETag"].strip('"'), key)
            if not found and self.location.key and not self.location.key.endswith("/"):
                yield from self._single_object(self.location.key)

    def _single_object(self, key: str) -> Iterator[RemoteFile]:
        """The URI names one object rather than a folder: fetch it under its own name."""
        try:
            head = self._client.head_object(Bucket=self.location.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return
            raise
        yield RemoteFile(key.rsplit("/", 1)[-1], head["ContentLength"], head["ETag"].strip('"'), key)

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        whole = offset == 0 and length == file.size
        self._getter.get(GetRequest(file.locator, file.version, offset, length, whole), sink)

    def interrupt(self) -> None:
        self._getter.interrupt()

    def close(self) -> None:
        self._client.close()

    def _signing_credentials(self) -> SigningCredentials | None:
        if self._credentials is None:
            return None
        frozen = self._credentials.get_frozen_credentials()  # refreshes assumed-role / IRSA credentials
        return SigningCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    def _display(self, key: str) -> str:
        return f"s3://{self.location.bucket}/{key}"

    @contextlib.contextmanager
    def _translated_errors(self) -> Iterator[None]:
        """Turn botocore's exceptions during listing into messages that say what to do."""
        where = str(self.location)
        try:
            yield
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code == "NoSuchBucket":
                raise FetchError(f"bucket {self.location.bucket!r} does not exist (listing {where})") from None
            if code in _DENIED:
                raise FetchError(
                    f"S3 refused listing {where}: {code}: {explain_denial(code, 's3:ListBucket')}"
                ) from None
            raise FetchError(f"S3 error listing {where}: {code}: {error.get('Message', exc)}") from None
        except NoCredentialsError:
            raise ConfigError(_NO_CREDENTIALS) from None
        except BotoCoreError as exc:
            raise FetchError(f"cannot list {where}: {exc}") from None


_NO_CREDENTIALS = (
    "no S3 credentials found: set ACCESS_KEY_ID and SECRET_ACCESS_KEY, provide them through the standard AWS "
    "chain (AWS_* variables, profile, web identity), or set ANONYMOUS=true for a public bucket"
)


def _checked_endpoint(endpoint: str | None) -> str | None:
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"ENDPOINT: expected an http:// or https:// URL, got {endpoint!r}")
    return endpoint


def _session(config: Config) -> botocore.session.Session:
    """A botocore session (boto3's core, without its import cost) with the contract's settings applied."""
    if bool(config.access_key_id) != bool(config.secret_access_key):
        missing = "SECRET_ACCESS_KEY" if config.access_key_id else "ACCESS_KEY_ID"
        raise ConfigError(f"{missing} is not set: ACCESS_KEY_ID and SECRET_ACCESS_KEY go together")
    if config.anonymous and (config.access_key_id or config.role_arn):
        raise ConfigError("ANONYMOUS=true conflicts with ACCESS_KEY_ID/ROLE_ARN: unsigned requests carry no identity")
    session = botocore.session.get_session()
    # Listings carry a LastModified per key that we never read; botocore's dateutil parsing of it costs
    # about 0.2 ms per key, more than the rest of the listing.
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    if config.access_key_id and config.secret_access_key:
        session.set_credentials(config.access_key_id, config.secret_access_key)
    if config.region:
        session.set_config_variable("region", config.region)
    if config.role_arn:
        _assume_role(session, config.role_arn, config.endpoint)
    return session


def _resolve_credentials(session: botocore.session.Session) -> botocore.credentials.Credentials:
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise FetchError(f"resolving S3 credentials failed: {exc}") from None
    if credentials is None:
        raise ConfigError(_NO_CREDENTIALS)
    return credentials


def _assume_role(session: botocore.session.Session, role_arn: str, endpoint: str | None) -> None:
    """Put refreshing credentials for ROLE_ARN, assumed with the base credentials, in front of the chain."""
    fetcher = botocore.credentials.AssumeRoleCredentialFetcher(
        client_creator=lambda service, **credentials: session.create_client(
            service, endpoint_url=endpoint, **credentials
        ),
        source_credentials=_resolve_credentials(session),
        role_arn=role_arn,
        extra_args={"RoleSessionName": "initializers"},
    )
    # botocore offers no public setter for refreshable credentials; this is what its own providers produce.
    session._credentials = botocore.credentials.DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
