"""How to reach a registry: basic auth, registries served over plain HTTP; and the Docker config files container
tools read credentials from (`AUTH_FILE_VARIABLES`, read by `credentials`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from initializers.common.errors import ConfigError
from initializers.config.settings import FALSE_WORDS, TRUE_WORDS, setting_field

#: podman's and skopeo's auth file, then docker's config folder (its `config.json`), as those tools look for them.
AUTH_FILE_VARIABLES = ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG")
_HOST_PORT = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?")


def plain_http_hosts(value: str | None) -> tuple[str, ...]:
    """The registries OCI_PLAIN_HTTP names: `("*",)` for true (every one), none for false, else its `host[:port]`s;
    a ConfigError naming it otherwise."""
    given = (value or "").strip().lower()
    if given in TRUE_WORDS:
        return ("*",)
    if given in FALSE_WORDS or not given:
        return ()
    hosts = tuple(part.strip() for part in given.split(",") if part.strip())
    if not all(_HOST_PORT.fullmatch(host) for host in hosts):
        raise ConfigError(f"OCI_PLAIN_HTTP: expected true, false or a comma-separated list of host:port, got {value!r}")
    return hosts


def https_unless(plain_http: tuple[str, ...], host: str) -> str:
    """The scheme a host is reached by: plain HTTP only where OCI_PLAIN_HTTP names it (or is true)."""
    return "http" if "*" in plain_http or host.lower() in plain_http else "https"


@dataclass(frozen=True)
class OciOptions:
    plain_http: str | None = setting_field(
        "OCI_PLAIN_HTTP",
        "Registries (and token services) served over plain HTTP rather than HTTPS, as `oras --plain-http` reaches "
        "them: true (every one), or a comma-separated list of host:port.",
    )
    username: str | None = setting_field(
        "OCI_USERNAME",
        "User name for the registry's basic auth (with OCI_PASSWORD); without it, the registry's entry in the Docker "
        "config file (REGISTRY_AUTH_FILE, else DOCKER_CONFIG's config.json), else anonymous.",
    )
    password: str | None = setting_field(
        "OCI_PASSWORD", "Password (or access token) for OCI_USERNAME at the registry.", secret=True
    )
