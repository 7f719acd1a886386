"""The oci:// source: an artifact in a container registry, its tag resolved once to a manifest digest that pins the
run (`manifests` says which manifest of an index, and which layers land), each layer one file verified by its sha256
digest as it lands, read in ranges through the HTTP object-store template (`registry`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config
from initializers.sources.http.objects import ObjectStorage
from initializers.sources.oci import manifests
from initializers.sources.oci.credentials import RegistryAuth, basic_credentials
from initializers.sources.oci.location import OciLocation
from initializers.sources.oci.options import OciOptions, https_unless, plain_http_hosts
from initializers.sources.oci.registry import OciRegistry
from initializers.store import answers
from initializers.store.hashers import SHA256, kinds


class OciSource(ObjectStorage):
    """An artifact's layers, read at the manifest digest its reference resolved to when listed. Blobs are read outside
    the lane: a registry may redirect them, and the lane follows no redirect."""

    pins_versions = True
    checksum_kinds = kinds(SHA256)

    def __init__(self, location: OciLocation, registry: OciRegistry) -> None:
        self.location = location
        self._registry = registry
        #: The manifest the run reads, once resolved; and the index it was chosen from, if any.
        self.digest: str | None = None
        self.index_digest: str | None = None
        super().__init__(registry.objects, registry.read_of, lane=False)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> OciSource:
        location = OciLocation.parse(uri)
        http = OciRegistry.http(config.read_timeout)
        plain_http = plain_http_hosts(config.options(OciOptions).plain_http)
        auth = RegistryAuth(basic_credentials(config, location.registry), http, location.repository, plain_http)
        scheme = https_unless(plain_http, location.registry)
        return cls(location, OciRegistry(location, scheme, http, auth))

    def describe(self) -> dict[str, Any]:
        pinned = {"digest": self.digest, **({"index_digest": self.index_digest} if self.index_digest else {})}
        tag = self.location.tag if self.location.is_digest else self.location.reference
        return {"uri": str(self.location), "registry": self._registry.server, "repository": self.location.repository,
                "tag": tag, **pinned}  # fmt: skip

    def list_files(self) -> Iterator[RemoteFile]:
        where = str(self.location)
        with answers.read_from(self._registry.server, f"reading the manifest of {where}"):
            document, kind, digest = self._manifest(self.location.reference, where)
            if kind in manifests.INDEXES:
                self.index_digest = digest
                chosen = manifests.chosen(document, where)
                document, kind, digest = self._manifest(chosen, f"{where} ({chosen})")
                if kind in manifests.INDEXES:
                    raise FetchError(f"{where}: the index's manifest {chosen} is an index itself, which is not read")
            self.digest = digest
            files = manifests.files_of(document, f"{self.location.place}@{digest}")
        yield from files

    def _manifest(self, reference: str, where: str) -> tuple[dict[str, Any], str, str]:
        """The manifest `reference` names, checked against its digest (the one asked for, else the one the registry
        says): its document, its kind and its digest."""
        body, content_type, said = self._registry.manifest(reference)
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        expected = reference if reference.startswith("sha256:") else said
        if expected and expected.startswith("sha256:") and expected != digest:
            raise FetchError(f"{where}: the manifest's digest is {digest}, not {expected}: checksum mismatch")
        document = answers.record(answers.parsed(body, "the manifest"), "the manifest")
        return dict(document), manifests.kind_of(document, content_type), digest
