"""How a run reaches Azure Blob Storage, decided once from the settings: the account's blob service (`Endpoint`) and
each request's proof (`Credential`: SharedKey, a SAS token, a Microsoft Entra token, or none for ANONYMOUS's public
containers); contradicting settings are refused, naming them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from initializers.common import logs
from initializers.common.errors import ConfigError
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.sources.azure.connection_string import VARIABLE, ConnectionString, parse_connection_string
from initializers.sources.azure.entra import EntraToken
from initializers.sources.azure.location import ACCOUNT_NAME, BLOB_HOST_SUFFIX, AzureLocation
from initializers.sources.azure.options import AzureOptions
from initializers.sources.azure.sharedkey import SharedKey


class Credential(Protocol):
    """What proves a request's right to the blobs it asks for."""

    #: What the user is to check when Azure refuses it: the variable it came from, in a phrase.
    check: str

    def authorize(self, path: str, params: Mapping[str, str], headers: dict[str, str]) -> str:
        """Add the request's proof to `headers` (a signature, a token); return the query's part ("" or a SAS token)."""


class SasToken:
    """A shared access signature, carried in every request's query as given."""

    def __init__(self, token: str, variable: str) -> None:
        token = token.strip().lstrip("?")
        if "sig=" not in token or any(char.isspace() or char == "#" for char in token):
            raise ConfigError(f"{variable}: not a SAS token (sv=...&sig=..., as the portal gives it; value not shown)")
        self._token = token
        self.check = f"{variable} (its expiry, and its permissions: read and list)"

    def __repr__(self) -> str:  # never show the token, even in a traceback
        return "SasToken('***')"

    def authorize(self, path: str, params: Mapping[str, str], headers: dict[str, str]) -> str:
        return self._token


class Unsigned:
    """No credential: ANONYMOUS, for containers that allow public read access."""

    check = "that the container allows anonymous read access (ANONYMOUS=true reads public containers only)"

    def authorize(self, path: str, params: Mapping[str, str], headers: dict[str, str]) -> str:
        return ""


@dataclass(frozen=True)
class Endpoint:
    """An account's blob service: scheme, host[:port], the path before the container (`/ACCOUNT` on an emulator)."""

    scheme: str
    netloc: str
    path: str

    @classmethod
    def parse(cls, url: str, variable: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ConfigError(f"{variable}: its blob endpoint is not an http:// or https:// URL (value not shown)")
        return cls(parts.scheme, parts.netloc, parts.path.rstrip("/"))

    def __str__(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.path}"


@dataclass(frozen=True)
class AzureAccess:
    """The run's way to the account: where it is served, its name when known, and the requests' credential."""

    endpoint: Endpoint
    account: str | None
    credential: Credential


def access_from(location: AzureLocation, config: Config) -> AzureAccess:
    """The run's `AzureAccess` from its settings (AzureOptions, ANONYMOUS) and the account a URL names."""
    options = config.options(AzureOptions)
    anonymous = config.options(AnonymousAccess).anonymous
    connection = parse_connection_string(options.connection_string) if options.connection_string else None
    _refuse_conflicts(options, connection, anonymous)
    account = _account(location, options, connection)
    if connection is not None:
        endpoint = Endpoint.parse(connection.endpoint, VARIABLE)
        if location.account is not None and endpoint.netloc.lower() != f"{location.account}{BLOB_HOST_SUFFIX}":
            raise ConfigError(
                f"STORAGE_URI names the account's endpoint {location.account}{BLOB_HOST_SUFFIX}, but {VARIABLE} "
                "another (its blob endpoint or endpoint suffix): use az://CONTAINER[/PREFIX] with the connection string"
            )
    elif account is not None:
        endpoint = Endpoint("https", f"{account}{BLOB_HOST_SUFFIX}", "")
    else:
        raise ConfigError(
            f"STORAGE_URI: {str(location)!r} names no storage account: set AZURE_STORAGE_ACCOUNT or {VARIABLE}, or "
            f"give the container's URL, {AzureLocation.URL_USAGE}"
        )
    return AzureAccess(endpoint, account, _credential(options, connection, anonymous, account))


def _refuse_conflicts(options: AzureOptions, connection: ConnectionString | None, anonymous: bool) -> None:
    """One credential at most (a connection string without one may say where, the variables sign); none if ANONYMOUS."""
    given = [name for name, value in (("AZURE_STORAGE_KEY", options.account_key),
                                      ("AZURE_STORAGE_SAS_TOKEN", options.sas_token)) if value]  # fmt: skip
    if connection is not None and (connection.key or connection.sas):
        given.insert(0, f"the {'account key' if connection.key else 'shared access signature'} in {VARIABLE}")
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} are both set: give one credential")
    if anonymous and given:
        raise ConfigError(f"ANONYMOUS=true conflicts with {given[0]}: unsigned requests carry no credential")


def _account(location: AzureLocation, options: AzureOptions, connection: ConnectionString | None) -> str | None:
    """The account: the one the URL names, the connection string's or AZURE_STORAGE_ACCOUNT; they must agree."""
    named = [
        ("STORAGE_URI's host", location.account),
        (f"the account name in {VARIABLE}", connection and connection.account),
        ("AZURE_STORAGE_ACCOUNT", options.account),
    ]
    given = [(source, account) for source, account in named if account]
    for source, account in given[1:]:
        if account != given[0][1]:
            raise ConfigError(f"{given[0][0]} names the account {given[0][1]!r}, {source} {account!r}: they conflict")
    if given and not ACCOUNT_NAME.fullmatch(given[0][1]):
        raise ConfigError(
            f"{given[0][0]}: {given[0][1]!r} is not a storage account name (3 to 24 lowercase letters and digits)"
        )
    return given[0][1] if given else None


def _credential(
    options: AzureOptions, connection: ConnectionString | None, anonymous: bool, account: str | None
) -> Credential:
    """The one credential the settings give, hidden from the logs; else a Microsoft Entra token, unless ANONYMOUS."""
    if connection is not None and connection.key:
        logs.hide(connection.key)
        return SharedKey(_signing_account(account, VARIABLE), connection.key, f"the account key in {VARIABLE}")
    if options.account_key:
        return SharedKey(_signing_account(account, "AZURE_STORAGE_KEY"), options.account_key, "AZURE_STORAGE_KEY")
    if connection is not None and connection.sas:
        logs.hide(connection.sas)
        return SasToken(connection.sas, f"the shared access signature in {VARIABLE}")
    if options.sas_token:
        return SasToken(options.sas_token, "AZURE_STORAGE_SAS_TOKEN")
    return Unsigned() if anonymous else EntraToken()


def _signing_account(account: str | None, variable: str) -> str:
    if account is None:
        raise ConfigError(
            f"{variable}: a key signs for a named account: set AZURE_STORAGE_ACCOUNT (or the account name in "
            f"{VARIABLE})"
        )
    return account
