"""Microsoft Entra tokens for Azure Storage from azure-identity's DefaultAzureCredential, imported for the first token,
never on runs signed otherwise; each is kept until about to expire, then fetched again, and hidden from the logs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError
from initializers.common.uri_credentials import credentials_sent

STORAGE_SCOPE = "https://storage.azure.com/.default"
#: Replaced this long before expiry, as azure-core does: a signed request must stay in time on a throttled server.
REFRESH_BEFORE_SECONDS = 300.0
#: Where a refused token comes from, for messages.
ENTRA_CHECK = (
    "the Microsoft Entra identity (AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE for AKS workload "
    "identity, else the managed identity) and its role on the container (Storage Blob Data Reader); or set "
    "AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING"
)


class EntraToken:
    """Bearer tokens from `credential` (azure-identity's chain unless given); thread-safe, one thread fetching all."""

    check = ENTRA_CHECK

    def __init__(self, credential: Any = None, clock: Callable[[], float] = time.time) -> None:
        self._credential = credential
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_on = 0.0

    def authorize(self, path: str, params: Mapping[str, str], headers: dict[str, str]) -> str:
        """The request's `Authorization: Bearer` header; nothing for its query."""
        headers["authorization"] = f"Bearer {self.current()}"
        return ""

    def current(self) -> str:
        """A token with more than `REFRESH_BEFORE_SECONDS` to live."""
        with self._lock:
            if self._token is None or self._expires_on - self._clock() < REFRESH_BEFORE_SECONDS:
                self._token, self._expires_on = self._fetch()
            return self._token

    def _fetch(self) -> tuple[str, float]:
        from azure.core.exceptions import AzureError

        if self._credential is None:
            self._credential = _default_credential()
        _hide_what_identity_sends()
        try:
            token = self._credential.get_token(STORAGE_SCOPE)
        except AzureError as exc:
            reason = " ".join(str(exc).split())
            raise FetchError(
                f"getting a Microsoft Entra token for Azure Storage failed: {reason}; check {ENTRA_CHECK}"
            ) from None
        logs.hide(token.token)
        return token.token, float(token.expires_on)


#: What azure-identity reads as its chain is made, and refuses when it cannot use them.
ENTRA_SETTINGS = (
    "AZURE_TENANT_ID, AZURE_AUTHORITY_HOST (an https:// URL), AZURE_CLIENT_CERTIFICATE_PATH (a PEM or PKCS12 file "
    "holding the private key and its certificate) and AZURE_CLIENT_CERTIFICATE_PASSWORD (for an encrypted key only)"
)
#: What azure-identity sends to prove who the run is: a client secret, a certificate's password, App Service's header.
_IDENTITY_SECRETS = ("AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "IDENTITY_HEADER", "MSI_SECRET")
#: The file holding AKS workload identity's projected token, which azure-identity sends Entra as its assertion.
FEDERATED_TOKEN_FILE = "AZURE_FEDERATED_TOKEN_FILE"


def _default_credential() -> Any:
    """azure-identity's chain as Azure's SDKs use it, what it reads to prove who the run is hidden first."""
    from azure.identity import DefaultAzureCredential

    _hide_what_identity_sends()
    try:
        return DefaultAzureCredential(raw_request_hook=_hide_what_is_sent)
    except (OSError, TypeError, ValueError) as exc:  # what it raises for settings it cannot use, read as it is made
        reason = f"{exc.strerror} ({exc.filename})" if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"azure-identity refused its settings: {reason.rstrip('.')}; check {ENTRA_SETTINGS}"
        ) from None


def _hide_what_is_sent(request: Any) -> None:
    """azure-core's hook on every request of azure-identity's credentials (msal's too, sent through its pipeline): each
    credential it carries (a client assertion, minted for this request alone; a secret; a federated token) is hidden
    before it leaves, so that a token endpoint quoting it back never prints it."""
    sent = request.http_request
    for secret in credentials_sent(sent.url, sent.body, sent.headers):
        logs.hide(secret)


def _hide_what_identity_sends() -> None:
    """What azure-identity reads to prove who the run is (`_IDENTITY_SECRETS`, the federated token, which Kubernetes
    renews in its file: read again before each token), read by it alone, hidden before it sends any of it."""
    for name in _IDENTITY_SECRETS:
        logs.hide(os.environ.get(name, "").strip())
    if token_file := os.environ.get(FEDERATED_TOKEN_FILE):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            logs.hide(Path(token_file).read_text().strip())  # a file it cannot read is azure-identity's to report
