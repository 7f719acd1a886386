"""AWS settings shared by the S3 and cache sources: static keys as given, anything else through botocore.

Users' credential setups (static keys, AWS_* variables, profiles, web identity / IRSA, an assumed role)
behave exactly as with boto3, because botocore resolves them. botocore is slow to import and to set up, so
sources skip it when the contract's keys (or ANONYMOUS) and ENDPOINT leave it nothing to decide.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from initializers.contract import Config
from initializers.errors import ConfigError, FetchError
from initializers.sources.sigv4 import SigningCredentials

if TYPE_CHECKING:  # botocore is imported only where it has something to resolve
    import botocore.credentials
    import botocore.session

NO_CREDENTIALS = (
    "no S3 credentials found: set ACCESS_KEY_ID and SECRET_ACCESS_KEY, provide them through the standard AWS "
    "chain (AWS_* variables, profile, web identity), or set ANONYMOUS=true for a public bucket"
)


def checked_endpoint(endpoint: str | None) -> str | None:
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"ENDPOINT: expected an http:// or https:// URL, got {endpoint!r}")
    return endpoint


def check_credential_settings(config: Config, role_arn: str | None, role_variable: str) -> None:
    """Refuse combinations of credential settings that cannot mean anything."""
    if bool(config.access_key_id) != bool(config.secret_access_key):
        missing = "SECRET_ACCESS_KEY" if config.access_key_id else "ACCESS_KEY_ID"
        raise ConfigError(f"{missing} is not set: ACCESS_KEY_ID and SECRET_ACCESS_KEY go together")
    if config.anonymous and (config.access_key_id or role_arn):
        raise ConfigError(
            f"ANONYMOUS=true conflicts with ACCESS_KEY_ID/{role_variable}: unsigned requests carry no identity"
        )


def static_credentials(config: Config, role_arn: str | None) -> SigningCredentials | None:
    """The contract's keys when they are all there is to resolve (no role to assume with them)."""
    if config.access_key_id and config.secret_access_key and not role_arn:
        return SigningCredentials(config.access_key_id, config.secret_access_key)
    return None


def region_setting(config: Config) -> str | None:
    """REGION, else the AWS_* variables; None leaves it to a botocore profile or the caller's default."""
    return config.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


def shared_config_present() -> bool:
    """An AWS config file may hold a profile's region or CA bundle, which only botocore reads."""
    return os.path.exists(os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config"))


def aws_session(config: Config, role_arn: str | None, role_variable: str) -> botocore.session.Session:
    """A botocore session (boto3's core, without its import cost) with the contract's settings applied."""
    import botocore.session

    check_credential_settings(config, role_arn, role_variable)
    session = botocore.session.get_session()
    # Listings carry a LastModified per key that we never read, and botocore's dateutil parsing of it costs more
    # than the rest of the listing.
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    if config.access_key_id and config.secret_access_key:
        session.set_credentials(config.access_key_id, config.secret_access_key)
    if config.region:
        session.set_config_variable("region", config.region)
    if role_arn:
        _assume_role(session, role_arn, config.endpoint)
    return session


def resolve_credentials(session: botocore.session.Session) -> botocore.credentials.Credentials:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        credentials = session.get_credentials()
    except (BotoCoreError, ClientError) as exc:
        raise credentials_failed("resolving", exc) from None
    if credentials is None:
        raise ConfigError(NO_CREDENTIALS)
    return credentials


def refreshing_credentials(session: botocore.session.Session | None) -> Callable[[], SigningCredentials]:
    """The chain's credentials, frozen per request: assumed-role and IRSA credentials refresh themselves."""
    from botocore.exceptions import BotoCoreError, ClientError

    assert session is not None, "credentials come from the chain only when botocore has a session"
    chain = resolve_credentials(session)

    def current() -> SigningCredentials:
        try:
            frozen = chain.get_frozen_credentials()
        except (BotoCoreError, ClientError) as exc:
            raise credentials_failed("refreshing", exc) from None
        return SigningCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    return current


#: STS's codes for credentials it does not accept at all, as opposed to a role they may not assume.
_REJECTED_BY_STS = frozenset({"InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidAccessKeyId"})


def credentials_failed(doing: str, exc: Exception) -> FetchError:
    """A failure to obtain credentials (the chain, or STS's AssumeRole for ROLE_ARN), in the service's own words."""
    error = getattr(exc, "response", None) or {}
    code, message = error.get("Error", {}).get("Code"), error.get("Error", {}).get("Message")
    if code is None:  # botocore's own failure: a missing file, an unreachable endpoint, a malformed profile
        return FetchError(f"{doing} S3 credentials failed: {exc}")
    if code in _REJECTED_BY_STS:
        hint = "STS rejected the credentials used to assume it: check ACCESS_KEY_ID and SECRET_ACCESS_KEY"
    elif code == "AccessDenied":
        hint = "these credentials may not assume it: check ROLE_ARN and the role's trust policy"
    else:
        hint = "STS refused it"
    return FetchError(f"{doing} S3 credentials for ROLE_ARN failed: {hint} ({code}: {message})")


def _assume_role(session: botocore.session.Session, role_arn: str, endpoint: str | None) -> None:
    """Put refreshing credentials for ROLE_ARN, assumed with the base credentials, in front of the chain."""
    import botocore.credentials

    from initializers.adapters.botocore import set_credentials

    fetcher = botocore.credentials.AssumeRoleCredentialFetcher(
        client_creator=lambda service, **credentials: session.create_client(
            service, endpoint_url=endpoint, **credentials
        ),
        source_credentials=resolve_credentials(session),
        role_arn=role_arn,
        extra_args={"RoleSessionName": "initializers"},
    )
    assumed = botocore.credentials.DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    set_credentials(session, assumed)
