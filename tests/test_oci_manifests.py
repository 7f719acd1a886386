"""What the oci:// store makes of a manifest, whatever a registry answers: the files its layers land as, or an error of
ours saying what is wrong (`Malformed`, named with the registry where the source reads it, or a FetchError), never
another exception. The shapes are generated: a manifest and an index whose values (one to three, the document itself
among them) are replaced by hostile ones: any JSON value (lists for objects, numbers for strings, null, lone
surrogates), sizes huge and negative, digests of other algorithms, names with `..`, backslashes and NUL."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from initializers.common.errors import FetchError
from initializers.plan.safe_paths import safe_relative_path
from initializers.sources.oci import manifests
from initializers.store import answers

SHA = "sha256:" + "ab" * 32
#: Any character, lone surrogates included (JSON's `\ud800` decodes to one).
TEXT = st.text(st.characters(codec=None), max_size=12)
NAMES = st.sampled_from(
    ["w.bin", "../x", "/etc/x", "a\\..\\b", "a\0b", "", ".", "a/", "é" * 200, "\ud800", ".initializer/x"]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


BASE_MANIFEST = {
    "schemaVersion": 2, "mediaType": manifests.OCI_MANIFEST, "artifactType": "application/vnd.example+type",
    "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": SHA, "size": 2},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": SHA, "size": 5,
                "annotations": {manifests.TITLE: "w.bin"}}] * 2,
}  # fmt: skip
BASE_INDEX = {
    "schemaVersion": 2, "mediaType": manifests.OCI_INDEX,
    "manifests": [{"mediaType": manifests.OCI_MANIFEST, "digest": SHA, "size": 9,
                   "platform": {"os": "linux", "architecture": "amd64"}}] * 2,
}  # fmt: skip
#: Where a value can stand in a manifest or an index: a path of keys and list positions from its top.
PLACES = [
    (BASE_MANIFEST, ()), (BASE_MANIFEST, ("mediaType",)), (BASE_MANIFEST, ("artifactType",)),
    (BASE_MANIFEST, ("config",)), (BASE_MANIFEST, ("config", "mediaType")), (BASE_MANIFEST, ("layers",)),
    *((BASE_MANIFEST, ("layers", 1, *rest)) for rest in [(), ("mediaType",), ("digest",), ("size",), ("annotations",),
      ("annotations", manifests.TITLE), ("annotations", manifests.FILEPATH), ("annotations", manifests.ORAS_UNPACK)]),
    (BASE_INDEX, ("mediaType",)), (BASE_INDEX, ("manifests",)), (BASE_INDEX, ("manifests", 0)),
    *((BASE_INDEX, ("manifests", 1, *rest)) for rest in [("digest",), ("platform",), ("platform", "os"),
      ("mediaType",)]),
]  # fmt: skip
HOSTILE = st.one_of(
    JSON,
    NAMES,
    st.sampled_from([*manifests.INDEXES, *manifests.MANIFESTS, *manifests.IMAGE_CONFIGS, "sha256:" + "AB" * 32,
                     "sha512:" + "ab" * 64, -1, 2**63, 2**80, 1.5, "5", [], {}]),
)  # fmt: skip


def placed(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of `document` with `value` at `path` (the whole document for an empty path); `document` itself when an
    earlier change took that place away."""
    if not path:
        return value
    if not (isinstance(document, dict) and path[0] in document) and not (
        isinstance(document, list) and isinstance(path[0], int) and path[0] < len(document)
    ):
        return document
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[path[0]] = placed(document[path[0]], path[1:], value)
    return copy


def read(document: Any, content_type: str | None) -> None:
    """The manifest read as the source reads it, and each file's path as the plan checks it."""
    document = answers.record(document, "the manifest")
    kind = manifests.kind_of(document, content_type)
    if kind in manifests.INDEXES:
        assert manifests.SHA256_DIGEST.fullmatch(manifests.chosen(document, "oci://r/m:v1"))
        return
    for file in manifests.files_of(document, "oci://r/m@" + SHA):
        assert isinstance(file.path, str) and file.path
        assert manifests.SHA256_DIGEST.fullmatch(file.locator) and 0 <= file.size <= answers.MAX_SIZE
        safe_relative_path(file.path)


@settings(max_examples=1500)
@example([((BASE_MANIFEST, ("layers", 1, "annotations", manifests.TITLE)), "\ud800")], None)  # JSON's "\\ud800"
@given(st.lists(st.tuples(st.sampled_from(PLACES), HOSTILE), min_size=1, max_size=3), st.one_of(st.none(), TEXT))
def test_any_manifest_is_files_or_an_error_of_ours(changes: list[tuple[Any, Any]], content_type: str | None):
    """A manifest or an index with one to three of its values (the same document's) replaced by hostile ones."""
    document = changes[0][0][0]
    for (base, path), value in changes:
        if base is changes[0][0][0]:
            document = placed(document, path, value)
    with contextlib.suppress(answers.Malformed, FetchError):
        read(answers.parsed(json.dumps(document).encode(), "the manifest"), content_type)


@pytest.mark.parametrize(
    "body", [b"[" * 100_000, b'{"a":' * 50_000, b"\xff{", b"{"], ids=["list", "object", "utf8", "cut"]
)
def test_json_nested_deeper_than_the_parser_recurses_is_malformed(body: bytes):
    with pytest.raises(answers.Malformed, match=r"^the manifest is not JSON$"):
        answers.parsed(body, "the manifest")


def test_an_index_with_no_manifest_chosen_names_a_few_of_its_platforms_cut_short():
    """An index holds as many platforms, as long, as its registry likes: the message names eight, each cut short."""
    entries = [{"digest": SHA, "platform": {"os": f"os{n:02}" + "x" * 10_000, "architecture": "a"}} for n in range(30)]
    with pytest.raises(FetchError) as refused:
        manifests.chosen({"manifests": entries}, "oci://r/m:v1")
    said = str(refused.value)
    assert "the index holds 30 manifests (os00" in said and "os07" in said and "os08" not in said, said
    assert "and 22 more) and none is chosen" in said and len(said) < 1000, said
