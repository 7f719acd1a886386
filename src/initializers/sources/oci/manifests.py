"""What a manifest means: an image index narrowed to one manifest, and an artifact's layers as the files that land.

Which manifest of an index: its only one; else the one entry that names no platform (an artifact's, as ORAS and
ModelPack tools push them: a model has no platform); else `linux/amd64`'s; else none is chosen, and the run fails
naming what the index holds. An artifact is told by the manifest (`artifactType`, or a config of another type than an
image's), never by a layer's media type: ORAS labels a raw file `application/vnd.oci.image.layer.v1.tar`. Its layers
land one file each, at the name their `org.opencontainers.image.title` (ORAS) or `org.cncf.model.filepath` (ModelPack)
annotation gives; a layer to unpack (ORAS's directories, ModelPack's tar layers) and images (modelcars) are refused,
as unpacking is not supported yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.sources.oci.location import SHA256_DIGEST
from initializers.store import answers

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEXES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
#: What a manifest request accepts: every kind read here.
ACCEPT = ", ".join((OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST))
#: The configs of a container image (an image is no artifact).
IMAGE_CONFIGS = frozenset(
    {"application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json"}
)
TITLE, FILEPATH = "org.opencontainers.image.title", "org.cncf.model.filepath"
#: ORAS's mark of a layer that is a folder packed as a tar.
ORAS_UNPACK = "io.deis.oras.content.unpack"
MODELPACK_LAYER = "application/vnd.cncf.model."
NOT_YET = "unpacking layers is not supported yet"
#: How many of an index's platforms a message names, and how much of each: an index holds what its registry likes.
_PLATFORMS_SHOWN, _PLATFORM_SHOWN = 8, 40


def kind_of(document: Mapping[str, Any], content_type: str | None) -> str:
    """The manifest's media type: its own field, else the Content-Type it came with; Malformed for another kind."""
    given = document.get("mediaType") or (content_type or "").partition(";")[0].strip()
    if isinstance(given, str) and (given in INDEXES or given in MANIFESTS):
        return given
    if document.get("schemaVersion") == 2 and "manifests" in document:
        return OCI_INDEX  # the OCI spec lets an index leave its media type out
    if document.get("schemaVersion") == 2 and "layers" in document:
        return OCI_MANIFEST
    raise answers.Malformed(f"a manifest of an unknown kind ({answers.shown(given or None)}): expected one of {ACCEPT}")


def chosen(index: Mapping[str, Any], where: str) -> str:
    """The digest of the manifest of `index` that is fetched (the module's docstring states the rule)."""
    entries = [
        answers.record(entry, "an entry of the index")
        for entry in answers.records(index.get("manifests"), "the index's manifests")
    ]
    if len(entries) == 1:
        return _digest(entries[0], "the index's manifest")
    unplatformed = [entry for entry in entries if not entry.get("platform")]
    amd64 = [entry for entry in entries if _platform(entry) == ("linux", "amd64")]
    for found in (unplatformed, amd64):
        if len(found) == 1:
            return _digest(found[0], "the index's manifest")
    platforms = sorted({"/".join(_platform(entry)) for entry in entries})
    named = ", ".join(
        platform if len(platform) <= _PLATFORM_SHOWN else f"{platform[:_PLATFORM_SHOWN]}..."
        for platform in platforms[:_PLATFORMS_SHOWN]
    )
    if len(platforms) > _PLATFORMS_SHOWN:
        named += f" and {len(platforms) - _PLATFORMS_SHOWN} more"
    raise FetchError(
        f"{where}: the index holds {len(entries)} manifests ({named or 'no platforms'}) and none is "
        "chosen: an artifact's (no platform), else linux/amd64's, is taken; name the manifest by its digest"
    )


def _platform(entry: Mapping[str, Any]) -> tuple[str, str]:
    platform = entry.get("platform")
    if not isinstance(platform, dict):
        return "", ""
    return str(platform.get("os", "")), str(platform.get("architecture", ""))


def files_of(manifest: Mapping[str, Any], where: str) -> list[RemoteFile]:
    """The files an artifact's layers land as; FetchError for an image or a layer to unpack."""
    config = answers.record(manifest.get("config"), "the manifest's config")
    config_type = answers.text(config.get("mediaType"), "the config's media type")
    if not manifest.get("artifactType") and config_type in IMAGE_CONFIGS:
        raise FetchError(
            f"{where} is a container image (config {config_type}), not an artifact: {NOT_YET}, so images and "
            "modelcars cannot be fetched; push the model's files as an OCI artifact (oras push) or ModelPack raw layers"
        )
    files = []
    for number, layer in enumerate(answers.records(manifest.get("layers"), "the manifest's layers"), 1):
        layer = answers.record(layer, "a layer")
        media_type = answers.text(layer.get("mediaType"), "a layer's media type")
        digest = _digest(layer, f"layer {number}")
        size = answers.size(layer.get("size"), f"the size of layer {number}")
        notes = answers.record(layer.get("annotations") or {}, f"the annotations of layer {number}")
        name = notes.get(TITLE) or notes.get(FILEPATH)
        if notes.get(ORAS_UNPACK) or (media_type.startswith(MODELPACK_LAYER) and ".tar" in media_type):
            raise FetchError(f"{where}: layer {number} ({digest}, {media_type}) is an archive to unpack: {NOT_YET}")
        if not isinstance(name, str) or not name:
            raise FetchError(
                f"{where}: layer {number} ({digest}, {media_type}) has no {TITLE} or {FILEPATH} annotation: it names "
                f"no file to land, and {NOT_YET}"
            )
        files.append(RemoteFile(name, size, digest, digest, Checksum("sha256", digest.partition(":")[2])))
    return files


def _digest(descriptor: Mapping[str, Any], what: str) -> str:
    """A descriptor's digest, a sha256 one (the only algorithm read yet)."""
    digest = answers.text(descriptor.get("digest"), f"the digest of {what}")
    if not SHA256_DIGEST.fullmatch(digest):
        raise answers.Malformed(f"the digest of {what}, {answers.shown(digest)}, is not sha256: and 64 hex digits")
    return digest
