"""Where in a container registry `STORAGE_URI` points: `oci://REGISTRY[:PORT]/REPOSITORY[:TAG][@sha256:DIGEST]`, as
container tools name an image (`latest` when neither a tag nor a digest is given; a digest wins over a tag given with
it, which is then only recorded), checked by the distribution spec's grammar for repositories, tags and digests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked

#: The distribution spec's grammar: a repository's path components, a tag, a digest (sha256, what every registry uses).
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
#: A manifest's or a blob's digest, as a URI and a registry's descriptors write it (sha256, the only one read yet).
SHA256_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
_REGISTRY = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                       r"(?::[0-9]{1,5})?")  # fmt: skip
#: Docker Hub's name, and the host its API answers at (as docker and podman map it).
DOCKER_HUB, DOCKER_HUB_API = "docker.io", "registry-1.docker.io"


@dataclass(frozen=True)
class OciLocation:
    """A registry (`host[:port]`), a repository in it, and a tag or a manifest digest (`sha256:...`): the reference
    read; and the tag given with a digest, if any."""

    registry: str
    repository: str
    reference: str
    tag: str | None = None

    USAGE: ClassVar[str] = "oci://REGISTRY[:PORT]/REPOSITORY[:TAG][@sha256:DIGEST]"

    @classmethod
    def parse(cls, uri: str) -> OciLocation:
        rest = uri.partition("://")[2]
        registry, _, path = rest.partition("/")
        if not _REGISTRY.fullmatch(registry) or not path:
            raise ConfigError(
                f"STORAGE_URI: {masked(uri)!r} does not name a registry and a repository in it; expected {cls.USAGE}"
            )
        repository, at, digest = path.partition("@")
        tag = None
        if ":" in repository.rsplit("/", 1)[-1]:
            repository, _, tag = repository.rpartition(":")
            if not _TAG.fullmatch(tag):
                raise ConfigError(
                    f"STORAGE_URI: {tag!r} is not a tag (up to 128 letters, digits, '_', '.' and '-', not starting "
                    f"with '.' or '-'); expected {cls.USAGE}"
                )
        if at and not SHA256_DIGEST.fullmatch(digest):
            raise ConfigError(f"STORAGE_URI: {digest!r} is not a digest (sha256: and 64 lowercase hex digits)")
        if not _REPOSITORY.fullmatch(repository):
            raise ConfigError(
                f"STORAGE_URI: {repository!r} is not a repository name (lowercase letters and digits, separated by "
                f"'.', '_', '__', '-' or '/'); expected {cls.USAGE}"
            )
        if registry.lower() == DOCKER_HUB and "/" not in repository:
            repository = f"library/{repository}"  # Docker Hub's official images, as docker names them
        if at:
            return cls(registry.lower(), repository, digest, tag)
        return cls(registry.lower(), repository, tag or "latest")

    @property
    def api_host(self) -> str:
        """Where the registry's API answers: Docker Hub's at its own host."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def is_digest(self) -> bool:
        return self.reference.startswith("sha256:")

    @property
    def place(self) -> str:
        """What is fetched, whatever its version: the repository."""
        return f"oci://{self.registry}/{self.repository}"

    def __str__(self) -> str:
        if self.is_digest:
            return f"{self.place}{f':{self.tag}' if self.tag else ''}@{self.reference}"
        return f"{self.place}:{self.reference}"
