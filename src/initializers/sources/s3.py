"""The S3 source: botocore (boto3's core) for credentials, configuration and listing; lean signed GETs for bytes.

Users' credential setups (static keys, AWS_* variables, profiles, web identity / IRSA, an assumed role)
behave exactly as with boto3, because botocore resolves them; only the data requests bypass it.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from typing import Any

from botocore import UNSIGNED
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from initializers.contract import Config
from initializers.errors import ConfigError, FetchError
from initializers.plan import RemoteFile
from initializers.sources.aws import NO_CREDENTIALS, aws_session, checked_endpoint, resolve_credentials
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
        self._endpoint_url = checked_endpoint(config.endpoint)
        session = aws_session(config, config.role_arn, "ROLE_ARN")
        self._credentials = None if config.anonymous else resolve_credentials(session)
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
        endpoint = ObjectEndpoint.from_object_url(
            self._client.generate_presigned_url("get_object", Params={"Bucket": location.bucket, "Key": PROBE_KEY})
        )
        self._getter = S3Getter(
            endpoint,
            self.region,
            self._signing_credentials,
            # Loading the trust store costs ~20 ms: only for https.
            None if endpoint.scheme != "https" else ssl.create_default_context(cafile=ca_bundle),
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
            raise ConfigError(NO_CREDENTIALS) from None
        except BotoCoreError as exc:
            raise FetchError(f"cannot list {where}: {exc}") from None
