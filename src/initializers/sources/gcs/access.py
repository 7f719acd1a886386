"""How a run reaches Cloud Storage, decided once: where requests go (GCS_ENDPOINT, else Google's) and the authorization
each carries as of now: google-auth's tokens, found as every Google client finds them (`_NO_CREDENTIALS` lists where)
and refreshed before they expire; none for ANONYMOUS (public buckets) or an emulator (STORAGE_EMULATOR_HOST).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError, first_line
from initializers.common.uri_credentials import credentials_in_body, credentials_sent, masked
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.sources.gcs.options import GOOGLE_AUTH_VARIABLES, GcsOptions

GCS_ENDPOINT = "https://storage.googleapis.com"
#: Where google-auth finds a key file (or a workload-identity-federation file): its path.
(KEY_FILE_VARIABLE,) = GOOGLE_AUTH_VARIABLES
#: Reading objects and listing them is all a run does.
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
_NO_CREDENTIALS = (
    "no Google credentials were found: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key or a "
    "workload-identity-federation file, run on GKE with Workload Identity, set ANONYMOUS=true for a public bucket, "
    "or STORAGE_EMULATOR_HOST for an emulator"
)


@dataclass(frozen=True)
class GcsAccess:
    """Where a run's requests go (`scheme://host[:port]`), and the headers that authorize each, as of now."""

    endpoint: str
    authorization: Callable[[], dict[str, str]]


def access_from(config: Config) -> GcsAccess:
    """The run's `GcsAccess`, google-auth's credentials resolved now: a run with none is refused before it lists."""
    options = config.options(GcsOptions)
    if options.emulator_host:
        emulator = options.emulator_host
        return GcsAccess(
            _origin("STORAGE_EMULATOR_HOST", emulator if "://" in emulator else f"http://{emulator}"), dict
        )
    endpoint = _origin("GCS_ENDPOINT", options.gcs_endpoint) if options.gcs_endpoint else GCS_ENDPOINT
    if config.options(AnonymousAccess).anonymous:
        return GcsAccess(endpoint, dict)
    return GcsAccess(endpoint, _Tokens(_default_credentials()).headers)


def _origin(variable: str, url: str) -> str:
    """`scheme://host[:port]` of an http(s) URL a variable gives; ConfigError naming it otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ConfigError(f"{variable}: expected http(s)://host[:port], got {masked(url)!r}")
    return f"{parts.scheme}://{parts.netloc}"


def _default_credentials() -> Any:
    """google-auth's application-default credentials, scoped to reading; ConfigError when there are none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    _refuse_a_key_given_whole(os.environ.get(KEY_FILE_VARIABLE, ""))
    _hide_the_key_file(os.environ.get(KEY_FILE_VARIABLE, ""))

    try:
        credentials, _project = google.auth.default(scopes=[READ_ONLY_SCOPE])
    except DefaultCredentialsError as exc:
        raise ConfigError(f"{_NO_CREDENTIALS} ({first_line(exc)})") from None
    return credentials


def _refuse_a_key_given_whole(value: str) -> None:
    """A key's JSON put in GOOGLE_APPLICATION_CREDENTIALS itself (a Secret's content in the variable, not mounted as
    a file), hidden as a secret and refused without a word of it; google-auth would quote it back as a missing file."""
    if not value.lstrip().startswith("{"):
        return
    logs.hide(value)
    with contextlib.suppress(ValueError):
        key = json.loads(value)
        for secret in key.values() if isinstance(key, dict) else ():
            if isinstance(secret, str):
                logs.hide(secret)
    raise ConfigError(
        f"{KEY_FILE_VARIABLE}: holds a key's JSON itself (not shown), but it takes the path of a key file: mount the "
        "Secret as a file and name that file"
    )


def _hide_the_key_file(path: str) -> None:
    """The secrets of the key file google-auth is about to read (a service account's private key, an authorized
    user's refresh token and client secret), hidden before it reads them; a file it cannot read is its to report."""
    if not path:
        return
    with contextlib.suppress(OSError, ValueError):
        key = json.loads(Path(path).read_text())
        for secret in credentials_in_body(json.dumps(key)):
            logs.hide(secret)


def _hiding(inner: Any) -> Callable[..., Any]:
    """google-auth's transport of every token request: each credential sent (a signed assertion, a subject or refresh
    token) hidden before it leaves, each token received as it arrives, so an endpoint quoting either never prints it."""

    def request(url: str, method: str = "GET", body: Any = None, headers: Any = None, **kwargs: Any) -> Any:
        for secret in credentials_sent(url, body, headers or {}):
            logs.hide(secret)
        response = inner(url, method=method, body=body, headers=headers, **kwargs)
        for secret in credentials_in_body(response.data):
            logs.hide(secret)
        return response

    return request


class _Tokens:
    """The bearer token of google-auth credentials, refreshed (once, for all threads) before it expires."""

    def __init__(self, credentials: Any) -> None:
        import urllib3
        from google.auth.transport.urllib3 import Request

        self._credentials = credentials
        self._request = _hiding(Request(urllib3.PoolManager()))
        self._lock = threading.Lock()

    def headers(self) -> dict[str, str]:
        from google.auth.exceptions import GoogleAuthError

        with self._lock:
            if not self._credentials.valid:  # none yet, or expiring within google-auth's refresh margin
                try:
                    self._credentials.refresh(self._request)
                except GoogleAuthError as exc:
                    raise FetchError(f"refreshing the Google credentials failed: {first_line(exc)}") from None
                logs.hide(self._credentials.token)  # whatever way google-auth minted it
            return {"authorization": f"Bearer {self._credentials.token}"}
