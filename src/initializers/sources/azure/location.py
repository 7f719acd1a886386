"""Where in Azure Blob Storage `STORAGE_URI` points: `az://CONTAINER[/PREFIX]` (the account from the credentials, as
fsspec and obstore read it) or an account's blob URL as KServe writes it (`AzureLocation.URL_USAGE`). No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import quote, unquote, urlsplit

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked
from initializers.config.uris import folder_prefix

#: The host of an account's blob service in Azure's public cloud: `ACCOUNT.blob.core.windows.net`.
BLOB_HOST_SUFFIX = ".blob.core.windows.net"
#: Container names Azure accepts (`_CONTAINER_RULE`), and its three system containers.
_CONTAINER = re.compile(r"(?=[a-z0-9-]{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*|\$root|\$web|\$logs")
ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")
_CONTAINER_RULE = "3 to 63 lowercase letters, digits and single hyphens, beginning and ending with a letter or digit"


def is_blob_url(uri: str) -> bool:
    """Whether `uri` is an https:// address on an account's blob host, which `AzureLocation` reads."""
    parts = urlsplit(uri)
    return parts.scheme.lower() == "https" and (parts.hostname or "").endswith(BLOB_HOST_SUFFIX)


@dataclass(frozen=True)
class AzureLocation:
    """A container, a blob name or folder in it ("" for the whole container), and the account a URL names."""

    container: str
    name: str
    #: The account an https:// URL names; None for az://, whose account comes from the credentials.
    account: str | None = None

    USAGE: ClassVar[str] = "az://CONTAINER[/PREFIX]"
    URL_USAGE: ClassVar[str] = f"https://ACCOUNT{BLOB_HOST_SUFFIX}/CONTAINER[/PREFIX]"

    @classmethod
    def parse(cls, uri: str) -> AzureLocation:
        """The location `uri` names; a ConfigError naming STORAGE_URI and what is wrong."""
        if is_blob_url(uri):
            return cls._from_url(uri)
        container, _, name = uri.partition("://")[2].partition("/")
        return cls._checked(uri, container, name, None, cls.USAGE)

    @classmethod
    def _from_url(cls, uri: str) -> AzureLocation:
        """A blob URL, its path percent-decoded; a SAS in its query is refused: it would show wherever the URI does."""
        parts = urlsplit(uri)
        shown = masked(f"https://{parts.netloc}{parts.path}")
        if parts.query or parts.fragment:
            raise ConfigError(
                f"STORAGE_URI: {shown!r} carries a query or a fragment: give a SAS token in AZURE_STORAGE_SAS_TOKEN, "
                f"where it stays out of logs and the manifest (expected {cls.URL_USAGE})"
            )
        account = (parts.hostname or "")[: -len(BLOB_HOST_SUFFIX)]
        if not ACCOUNT_NAME.fullmatch(account) or parts.port is not None or parts.username is not None:
            raise ConfigError(
                f"STORAGE_URI: {shown!r} names no storage account Azure would accept (3 to 24 lowercase letters and "
                f"digits, no port): expected {cls.URL_USAGE}"
            )
        container, _, name = unquote(parts.path.lstrip("/")).partition("/")
        return cls._checked(shown, container, name, account, cls.URL_USAGE)

    @classmethod
    def _checked(cls, uri: str, container: str, name: str, account: str | None, usage: str) -> AzureLocation:
        if not container:
            raise ConfigError(f"STORAGE_URI: {masked(uri)!r} names no container; expected {usage}")
        if not _CONTAINER.fullmatch(container):
            raise ConfigError(
                f"STORAGE_URI: {container!r} is not a container name Azure accepts ({_CONTAINER_RULE}); "
                f"expected {usage}"
            )
        return cls(container, name.lstrip("/"), account)

    @property
    def folder_prefix(self) -> str:
        return folder_prefix(self.name)

    def uri_of(self, name: str) -> str:
        """A blob's URI in the form STORAGE_URI was given in, as messages name it."""
        if self.account is None:
            return f"az://{self.container}/{name}" if name else f"az://{self.container}"
        path = quote(f"{self.container}/{name}" if name else self.container, safe="/~$")
        return f"https://{self.account}{BLOB_HOST_SUFFIX}/{path}"

    def __str__(self) -> str:
        return self.uri_of(self.name)
