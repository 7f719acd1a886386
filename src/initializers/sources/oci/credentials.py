"""A registry's credentials, found as container tools find them, and the authorization each request carries: basic
auth (OCI_USERNAME and OCI_PASSWORD, else the registry's entry in a Docker config file: REGISTRY_AUTH_FILE, as podman
reads it, else DOCKER_CONFIG's `config.json`, as docker does; credential helpers are not run), and the bearer token a
registry's challenge (`WWW-Authenticate: Bearer realm=...,service=...,scope=...`) asks for, fetched from its realm
with those credentials (or none) and fetched again when the registry refuses it. Every secret is hidden (`logs.hide`)
the moment it is read or minted.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.oci.options import AUTH_FILE_VARIABLES, OciOptions, https_unless
from initializers.store import answers

#: A challenge of a WWW-Authenticate header (RFC 7235): its scheme, then its parameters, each `name="value"` or
#: `name=value` (a token, as Distribution's clients read it); a header may hold several, comma-separated.
_CHALLENGE = re.compile(r'([\w.-]+)((?:\s*(?:,\s*)?[\w.-]+\s*=\s*(?:"[^"]*"|[^\s,"]*))*)')
_PARAMETER = re.compile(r'([\w.-]+)\s*=\s*(?:"([^"]*)"|([^\s,"]*))')
_MAX_TOKEN_ANSWER = 1 << 20


def basic_credentials(config: Config, registry: str) -> tuple[str, str] | None:
    """The user and password for `registry`: the options', else its Docker config entry's; None: anonymous."""
    if config.options(AnonymousAccess).anonymous:
        return None
    options = config.options(OciOptions)
    if options.username or options.password:
        if not (options.username and options.password):
            raise ConfigError("OCI_USERNAME and OCI_PASSWORD: give both, or neither")
        return options.username, options.password
    return _from_auth_file(registry)


def _from_auth_file(registry: str) -> tuple[str, str] | None:
    """`registry`'s `auths` entry in the first Docker config file the variables name that exists; None: none."""
    variable, path = next(
        ((name, _auth_file(name, value)) for name in AUTH_FILE_VARIABLES if (value := os.environ.get(name))),
        (None, None),
    )
    if variable is None or path is None:
        return None
    try:
        auths = json.loads(path.read_text()).get("auths", {})
        if not isinstance(auths, dict):
            raise ValueError("auths is no object")
    except (OSError, ValueError, AttributeError):
        raise ConfigError(f"{variable}: {str(path)!r} is not a readable Docker config file (JSON)") from None
    entry = next((value for key, value in auths.items() if _host_of(key) == registry), None)
    if not isinstance(entry, dict):
        return None
    if "auth" in entry:
        try:
            logs.hide(str(entry["auth"]))
            user, colon, password = base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            user, colon, password = "", "", ""
        if not colon:
            raise ConfigError(f"{variable}: the auth of {registry} in {str(path)!r} is not base64 of user:password")
        logs.hide(password)
        return user, password
    if isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
        logs.hide(entry["password"])
        return entry["username"], entry["password"]
    return None


def _auth_file(variable: str, value: str) -> Path:
    """The file a variable names: REGISTRY_AUTH_FILE the file itself, DOCKER_CONFIG the folder of `config.json`."""
    return Path(value) / "config.json" if variable == "DOCKER_CONFIG" else Path(value)


def _host_of(key: str) -> str:
    """An `auths` key's registry: `host[:port]`, whether written bare or as a URL (`https://index.docker.io/v1/`)."""
    host = urlsplit(key).netloc if "://" in key else key.partition("/")[0]
    return "docker.io" if host in ("index.docker.io", "registry-1.docker.io") else host.lower()


class RegistryAuth:
    """The authorization of a registry's requests, as of now: basic credentials, or the bearer token its challenge
    asked for; thread-safe, a token fetched once for all threads."""

    def __init__(
        self, basic: tuple[str, str] | None, http: HttpGetter, repository: str, plain_http: tuple[str, ...]
    ) -> None:
        self._basic = None
        if basic is not None:
            self._basic = "Basic " + base64.b64encode(":".join(basic).encode()).decode()
            logs.hide(self._basic.partition(" ")[2])
        self._http = http
        self._repository = repository
        #: OCI_PLAIN_HTTP's hosts: the only ones the basic credentials may reach in clear.
        self._plain_http = plain_http
        self._token: str | None = None
        #: A request carrying the current token was answered: refused later, it has expired and is asked for anew.
        self._proven = False
        self._lock = threading.Lock()

    def headers(self) -> dict[str, str]:
        """The authorization to send now: the token once there is one, else the basic credentials, else none."""
        value = f"Bearer {self._token}" if self._token else self._basic
        return {"authorization": value} if value else {}

    def answered(self, sent: dict[str, str]) -> None:
        """A request that carried `sent` headers was answered, not refused."""
        if self._token and sent.get("authorization") == f"Bearer {self._token}":
            self._proven = True

    def answer(self, challenge: str | None, sent: dict[str, str]) -> bool:
        """Meet a 401's challenge to a request that carried `sent` headers: a token fetched (anew, unless another
        thread did meanwhile), or basic credentials not yet sent; False when nothing more can be sent (a token
        refused before any request carrying it was answered: fetching another would only loop)."""
        challenges = _challenges(challenge or "")
        if "bearer" not in challenges:
            return "basic" in challenges and self._basic is not None and sent.get("authorization") != self._basic
        with self._lock:
            if self.headers().get("authorization") != sent.get("authorization"):
                return True  # renewed by another thread since
            if self._token and not self._proven:
                return False
            self._token, self._proven = self._fetch(challenges["bearer"]), False
            return True

    def _fetch(self, fields: dict[str, str]) -> str:
        """A token from the challenge's realm, for its service and scope (else pulling this repository). The basic
        credentials go with the request, but over plain HTTP only to a host OCI_PLAIN_HTTP names: a registry reached
        over HTTPS that names an http:// realm would have them cross the network in clear."""
        try:
            realm = urlsplit(fields.get("realm", ""))
        except ValueError:  # an unclosed IPv6 bracket
            realm = urlsplit("")
        if realm.scheme not in ("http", "https") or not realm.netloc:
            raise FetchError(
                f"the registry's challenge names no token service (realm {answers.shown(fields.get('realm'))})"
            )
        if self._basic and realm.scheme == "http" and https_unless(self._plain_http, realm.netloc) == "https":
            raise FetchError(
                f"the registry's challenge names a token service over plain HTTP (http://{realm.netloc}), which the "
                f"credentials would reach in clear: refused; if that is meant, name {realm.netloc} in OCI_PLAIN_HTTP"
            )
        query = {"scope": fields.get("scope") or f"repository:{self._repository}:pull"}
        if fields.get("service"):
            query["service"] = fields["service"]
        target = f"{realm.path or '/'}?{'&'.join(filter(None, (realm.query, urlencode(query))))}"
        headers = {
            "host": realm.netloc,
            "user-agent": USER_AGENT,
            **({"authorization": self._basic} if self._basic else {}),
        }
        where = f"the token service at {realm.scheme}://{realm.netloc}"
        return self._http.retrying(
            "authenticate", where, lambda: self._token_from(Request(realm.scheme, realm.netloc, target, headers), where)
        )

    def _token_from(self, request: Request, where: str) -> str:
        response = self._http.send(request)
        body = response.read_all(_MAX_TOKEN_ANSWER)
        if response.status in RETRIABLE_STATUS or response.status >= 500:
            raise retriable(response.status, response.reason, response.header("retry-after"))
        if response.status in (401, 403):
            raise FetchError(
                f"{where} refused the credentials ({response.status}): check OCI_USERNAME and OCI_PASSWORD or the "
                "registry's entry in the Docker config file"
            )
        try:
            answer = answers.parsed(body, "the token service's answer")  # Malformed is a ValueError
            token = answer.get("token") or answer.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if response.status != 200 or not isinstance(token, str) or not token:
            raise FetchError(f"{where} answered {response.status} without a token")
        logs.hide(token)
        return token


def _challenges(header: str) -> dict[str, dict[str, str]]:
    """A WWW-Authenticate header's challenges, by scheme (in lower case; the first of each): their parameters."""
    found: dict[str, dict[str, str]] = {}
    for scheme, parameters in _CHALLENGE.findall(header):
        fields = {name.lower(): quoted or token for name, quoted, token in _PARAMETER.findall(parameters)}
        found.setdefault(scheme.lower(), fields)
    return found
