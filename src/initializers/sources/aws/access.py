"""AWS access shared by the S3 and cache sources: static keys as given, anything else through botocore, so credential
setups (AWS_* variables, profiles, web identity / IRSA, an assumed role) behave exactly as with boto3. botocore is slow
to import and set up: it is skipped when the contract's keys (or ANONYMOUS) and ENDPOINT leave it nothing to decide.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.config.settings import checked_value
from initializers.sources.aws.options import ENDPOINT_VARIABLES, AwsOptions
from initializers.sources.aws.sigv4 import SigningCredentials

if TYPE_CHECKING:  # botocore is imported only where it has something to resolve
    import botocore.credentials
    import botocore.session

NO_CREDENTIALS = (
    "no S3 credentials found: set ACCESS_KEY_ID and SECRET_ACCESS_KEY, provide them through the standard AWS "
    "chain (AWS_* variables, profile, web identity), or set ANONYMOUS=true for a public bucket"
)


@dataclass(frozen=True)
class Role:
    """A role to assume through STS, and the variable that named it for messages (ROLE_ARN, or the cache's IAM_ROLE)."""

    arn: str
    variable: str

    @classmethod
    def given(cls, arn: str | None, variable: str) -> Role | None:
        return cls(arn, variable) if arn else None


@dataclass(frozen=True)
class AwsAccess:
    """How a run reaches S3, decided once from the contract for the S3 and cache sources alike."""

    endpoint: str | None
    #: REGION, else AWS_REGION / AWS_DEFAULT_REGION, else a profile's, else us-east-1.
    region: str
    anonymous: bool
    role: Role | None
    #: AWS_CA_BUNDLE, or a profile's ca_bundle.
    ca_bundle: str | None
    #: The contract's keys when they are all there is to resolve (no role to assume with them).
    static: SigningCredentials | None
    #: REQUEST_PAYER=requester: every request agrees to pay for a Requester Pays bucket.
    requester_pays: bool
    #: botocore's session, when it has something to resolve (the chain, a role, endpoint rules, a profile).
    session: botocore.session.Session | None = field(default=None, compare=False, repr=False)

    def credentials(self) -> Callable[[], SigningCredentials | None]:
        """The credentials each request is signed with, as of now: none for ANONYMOUS (unsigned requests), the keys
        as given, else the chain's, resolved now and refreshing themselves (assumed roles, web identity)."""
        if self.anonymous or self.static:
            return lambda: self.static
        return refreshing_credentials(self.session, self.role)


def access_from(config: Config, role: Role | None = None) -> AwsAccess:
    """The run's `AwsAccess` from its settings (AwsOptions, ANONYMOUS); `role`: the cache's IAM_ROLE, else ROLE_ARN."""
    options = config.options(AwsOptions)
    role = role or Role.given(options.role_arn, "ROLE_ARN")
    return aws_access(options, role, config.options(AnonymousAccess).anonymous)


def aws_access(options: AwsOptions, role: Role | None, anonymous: bool) -> AwsAccess:
    """The run's `AwsAccess`: the settings checked once, botocore set up only when it has something to decide."""
    endpoint = endpoint_setting(options)
    check_credential_settings(options, role, anonymous)
    static = (
        SigningCredentials(options.access_key_id, options.secret_access_key)
        if options.access_key_id and options.secret_access_key and not role
        else None
    )
    nothing_to_resolve = bool(endpoint and (anonymous or static) and not shared_config_present())
    session = None if nothing_to_resolve else aws_session(options, role)
    region = region_setting(options) or (session and session.get_config_variable("region")) or "us-east-1"
    ca_bundle = session.get_config_variable("ca_bundle") if session else os.environ.get("AWS_CA_BUNDLE")
    if ca_bundle and not os.path.isfile(ca_bundle):
        raise ConfigError(f"AWS_CA_BUNDLE (or the profile's ca_bundle): no such file {ca_bundle!r}")
    requester_pays = options.request_payer == "requester"
    return AwsAccess(endpoint, region, anonymous, role, ca_bundle, static, requester_pays, session)


def endpoint_setting(options: AwsOptions) -> str | None:
    """ENDPOINT, else botocore's S3 endpoint variables in its order (`ENDPOINT_VARIABLES`), unless
    AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true, as botocore then ignores them: the endpoint both sources address
    path-style, pyarrow's reads of a cache:// table included. None leaves S3's own endpoint to botocore."""
    variable, endpoint = "ENDPOINT", options.endpoint
    if endpoint is None and os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() != "true":
        variable, raw = next(
            ((name, os.environ[name]) for name in ENDPOINT_VARIABLES if os.environ.get(name)), ("", "")
        )
        endpoint = checked_value(raw, variable).strip() or None
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{variable}: expected an http:// or https:// URL, got {endpoint!r}")
    return endpoint


def check_credential_settings(options: AwsOptions, role: Role | None, anonymous: bool) -> None:
    """Refuse combinations of credential settings that cannot mean anything."""
    if bool(options.access_key_id) != bool(options.secret_access_key):
        missing = "SECRET_ACCESS_KEY" if options.access_key_id else "ACCESS_KEY_ID"
        raise ConfigError(f"{missing} is not set: ACCESS_KEY_ID and SECRET_ACCESS_KEY go together")
    if anonymous and (options.access_key_id or role):
        raise ConfigError(
            f"ANONYMOUS=true conflicts with ACCESS_KEY_ID/{role.variable if role else 'ROLE_ARN'}: unsigned requests "
            "carry no identity"
        )


def region_setting(options: AwsOptions) -> str | None:
    """REGION, else the AWS_* variables; None leaves it to a botocore profile or the caller's default."""
    return options.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


def shared_config_present() -> bool:
    """An AWS config file may hold a profile's region or CA bundle, which only botocore reads."""
    return os.path.exists(os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config"))


def aws_session(options: AwsOptions, role: Role | None) -> botocore.session.Session:
    """A botocore session (boto3's core, without its import cost) with the contract's settings applied."""
    import botocore.session

    session = botocore.session.get_session()
    # botocore's dateutil parsing of each key's LastModified, which we never read, costs more than the rest of a page.
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    if options.access_key_id and options.secret_access_key:
        session.set_credentials(options.access_key_id, options.secret_access_key)
    if options.region:
        session.set_config_variable("region", options.region)
    if role:
        _assume_role(session, role, options.endpoint)
    return session


#: The file of the token EKS (IRSA) projects, which botocore sends STS for the role's session.
WEB_IDENTITY_TOKEN_FILE = "AWS_WEB_IDENTITY_TOKEN_FILE"


def resolve_credentials(session: botocore.session.Session, role: Role | None) -> botocore.credentials.Credentials:
    """The chain's credentials; the web identity token it sends STS (IRSA's projected token) hidden first."""
    from botocore.exceptions import BotoCoreError, ClientError

    if token_file := os.environ.get(WEB_IDENTITY_TOKEN_FILE):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            logs.hide(Path(token_file).read_text().strip())  # a file it cannot read is botocore's to report

    try:
        credentials = session.get_credentials()
    except (BotoCoreError, ClientError) as exc:
        raise credentials_failed("resolving", exc, role) from None
    if credentials is None:
        raise ConfigError(NO_CREDENTIALS)
    return credentials


def refreshing_credentials(
    session: botocore.session.Session | None, role: Role | None
) -> Callable[[], SigningCredentials]:
    """The chain's credentials, frozen per request: assumed-role and IRSA credentials refresh themselves."""
    from botocore.exceptions import BotoCoreError, ClientError

    assert session is not None, "credentials come from the chain only when botocore has a session"
    chain = resolve_credentials(session, role)

    def current() -> SigningCredentials:
        try:
            frozen = chain.get_frozen_credentials()
        except (BotoCoreError, ClientError) as exc:
            raise credentials_failed("refreshing", exc, role) from None
        for secret in (frozen.secret_key, frozen.token):  # minted by STS for a role or a web identity, or read
            logs.hide(secret or "")
        return SigningCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    return current


#: STS's codes for credentials it does not accept at all, as opposed to a role they may not assume.
_REJECTED_BY_STS = frozenset({"InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidAccessKeyId"})


def credentials_failed(doing: str, exc: Exception, role: Role | None) -> FetchError:
    """A failure to obtain credentials (the chain, or STS's AssumeRole for `role`), in the service's own words."""
    error = getattr(exc, "response", None) or {}
    code, message = error.get("Error", {}).get("Code"), error.get("Error", {}).get("Message")
    if code is None:  # botocore's own failure: a missing file, an unreachable endpoint, a malformed profile
        return FetchError(f"{doing} S3 credentials failed: {exc}")
    variable = role.variable if role else "AWS_ROLE_ARN"  # STS answered for the chain's role (web identity)
    if code in _REJECTED_BY_STS:
        hint = "STS rejected the credentials used to assume it: check ACCESS_KEY_ID and SECRET_ACCESS_KEY"
    elif code == "AccessDenied":
        hint = f"these credentials may not assume it: check {variable} and the role's trust policy"
    else:
        hint = "STS refused it"
    return FetchError(f"{doing} S3 credentials for {variable} failed: {hint} ({code}: {message})")


def _assume_role(session: botocore.session.Session, role: Role, endpoint: str | None) -> None:
    """Put refreshing credentials for `role`, assumed with the base credentials, in front of the chain."""
    import botocore.credentials

    from initializers.adapters.botocore import set_credentials

    fetcher = botocore.credentials.AssumeRoleCredentialFetcher(
        client_creator=lambda service, **credentials: session.create_client(
            service, endpoint_url=endpoint, **credentials
        ),
        source_credentials=resolve_credentials(session, None),
        role_arn=role.arn,
        extra_args={"RoleSessionName": "initializers"},
    )
    assumed = botocore.credentials.DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    set_credentials(session, assumed)
