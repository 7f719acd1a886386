"""Pure logic: URIs, ignore patterns, safe paths and plans."""

from __future__ import annotations

import posixpath
import re
import tempfile
from pathlib import Path

import pytest
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from hypothesis import given, settings
from hypothesis import strategies as st

from initializers.common.errors import ConfigError, FetchError
from initializers.common.logs import get_logger
from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config, Kind, programs
from initializers.config.patterns import Globs
from initializers.config.registry import SourcePlugin
from initializers.config.uris import scheme_of
from initializers.plan.index import PlanIndex
from initializers.plan.safe_paths import plan_files, safe_relative_path
from initializers.plan.selection import Selection
from initializers.sources import DATASET, MODEL, STORES
from initializers.sources.hub.location import HfLocation
from initializers.sources.s3.location import S3Location


@pytest.mark.parametrize(
    ("uri", "bucket", "key", "folder"),
    [
        ("s3://b", "b", "", ""),
        ("s3://b/", "b", "", ""),
        ("s3://b/data", "b", "data", "data/"),
        ("s3://b/data/", "b", "data/", "data/"),
        ("s3://b//x/y.bin", "b", "x/y.bin", "x/y.bin/"),
        ("S3://bucket.with.dots/a b/ü", "bucket.with.dots", "a b/ü", "a b/ü/"),
    ],
)
def test_s3_uris(uri: str, bucket: str, key: str, folder: str):
    location = S3Location.parse(uri)
    assert (location.bucket, location.key, location.folder_prefix) == (bucket, key, folder)


@pytest.mark.parametrize("uri", ["s3://", "s3:///key", "s3://bad bucket/x"])
def test_bad_s3_uris(uri: str):
    with pytest.raises(ConfigError, match="STORAGE_URI"):
        S3Location.parse(uri)


def _accepted(kind: Kind, then: str = "") -> str:
    """The schemes `kind` accepts, as its messages list them (`then`: after each)."""
    return ", ".join(f"{scheme}://{then}" for scheme in kind.schemes)


def _plugin(scheme: str, kinds: tuple[str, ...] = ("dataset",)) -> SourcePlugin:
    """A test-only store of `scheme`, no real one: it takes its scheme's URIs, reads no option and opens nothing."""
    return SourcePlugin(scheme, f"{scheme}://X", (), lambda uri, _kind: uri, lambda *_: None, kinds=kinds)


def test_schemes_per_kind():
    dataset_only = next(scheme for scheme in DATASET.schemes if scheme not in MODEL.schemes)
    assert [scheme_of(f"{scheme}://b/x", MODEL) for scheme in MODEL.schemes] == list(MODEL.schemes)
    assert [scheme_of(f"{scheme}://b/x", DATASET) for scheme in DATASET.schemes] == list(DATASET.schemes)
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"scheme {dataset_only}:// is not supported by the model-initializer; it accepts {_accepted(MODEL)}"
        ),
    ):
        scheme_of(f"{dataset_only}://a/b", MODEL)
    with pytest.raises(ConfigError, match="ftp:// is not supported"):
        scheme_of("ftp://b/x", DATASET)
    with pytest.raises(ConfigError, match="is not a URI"):
        scheme_of("/local/path", DATASET)


def test_a_program_accepts_the_stores_that_serve_it_in_the_order_of_the_tuple():
    assert DATASET.schemes == tuple(plugin.scheme for plugin in STORES if "dataset" in plugin.kinds)
    assert MODEL.schemes == tuple(plugin.scheme for plugin in STORES if "model" in plugin.kinds)
    dataset, model = programs((*STORES, _plugin("tmp")))
    assert dataset.schemes == (*DATASET.schemes, "tmp") and model.schemes == MODEL.schemes
    assert scheme_of("tmp://x", dataset) == "tmp"
    refused = f"STORAGE_URI: scheme tmp:// is not supported by the model-initializer; it accepts {_accepted(MODEL)}"
    with pytest.raises(ConfigError, match=f"^{re.escape(refused)}$"):
        scheme_of("tmp://x", model)
    *first, last = _accepted(model, "...").split(", ")
    with pytest.raises(ConfigError, match=re.escape(f"give the source as {', '.join(first)} or {last}")):
        Config.from_env({}).require_storage_uri(model)
    with pytest.raises(
        ConfigError, match=re.escape(f"{', '.join(f'{s}://...' for s in DATASET.schemes)} or tmp://...")
    ):
        Config.from_env({}).require_storage_uri(dataset)
    with pytest.raises(RuntimeError, match="declared for no program"):
        programs((*STORES, _plugin("none", kinds=())))
    with pytest.raises(RuntimeError, match="declared twice"):
        programs((*STORES, STORES[0]))


def test_a_claim_comes_before_the_store_of_the_uris_scheme():
    """The registry's rule: the store of scheme https:// takes only the https:// and http:// URIs no claim takes (the
    Hub's pages and Azure's blob addresses stay theirs), wherever it stands in the tuple."""
    claimed = ("https://huggingface.co/datasets/org/ds", "https://hf.co/org/m", "huggingface.co/org/m",
               "http://huggingface.co/org/m", "https://acct01.blob.core.windows.net/models/bert")  # fmt: skip
    (web,) = [plugin for plugin in STORES if plugin.scheme == "https"]
    others = tuple(plugin for plugin in STORES if plugin is not web)
    for stores in ((*others, web), (web, *others)):
        for kind in programs(stores):
            assert [scheme_of(uri, kind) for uri in claimed] == ["hf", "hf", "hf", "hf", "az"]
            assert scheme_of("https://example.com/x", kind) == scheme_of("http://example.com/x", kind) == "https"


@pytest.mark.parametrize("kind", [MODEL, DATASET])
def test_an_https_uri_that_is_no_hub_page_nor_azure_blob_goes_to_the_web_store(kind: Kind):
    assert scheme_of("https://huggingface.co/datasets/org/ds", kind) == scheme_of("https://hf.co/org/m", kind) == "hf"
    assert scheme_of("https://acct01.blob.core.windows.net/models/bert", kind) == "az"
    assert scheme_of("https://example.com/x", kind) == scheme_of("HTTP://example.com/x", kind) == "https"


@pytest.mark.parametrize(
    ("pattern", "path", "ignored"),
    [
        ("*.bin", "model.bin", True),
        ("*.bin", "sub/dir/model.bin", True),  # `*` crosses folders, as in huggingface_hub
        ("*.bin", "model.binary", False),
        ("logs/", "logs/a/b.txt", True),
        ("logs/", "x/logs/a.txt", False),
        ("sub/*.pt", "sub/a.pt", True),
        ("sub/*.pt", "other/sub/a.pt", False),
        ("[ab].txt", "a.txt", True),
        ("model-0000?.safetensors", "model-00001.safetensors", True),
    ],
)
def test_pattern_semantics(pattern: str, path: str, ignored: bool):
    assert Globs([pattern]).match(path) is ignored


def test_no_patterns_ignore_nothing():
    assert not Globs([]).match("anything")


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a/b.txt", "a/b.txt"), ("a//b.txt", "a/b.txt"), ("./a/./b", "a/b"), ("a/b/", "a/b"), ("..x/y..", "..x/y..")],
)
def test_safe_paths_are_normalised(name: str, expected: str):
    assert safe_relative_path(name) == expected


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("/etc/passwd", "absolute"),
        ("a\0b", "NUL"),
        ("a/\ud800.bin", "lone surrogate"),  # what a JSON listing's "\\ud800" decodes to
        ("", "names no file"),
        ("./", "names no file"),
        (".initializer/manifest.json", "reserved"),
        ("data/" + "x" * 256 + "/part.bin", "longer than 255 bytes"),
        ("é" * 128, "longer than 255 bytes"),  # 256 bytes in UTF-8
    ],
)
def test_unsafe_paths_are_refused(name: str, reason: str):
    with pytest.raises(FetchError, match=reason):
        safe_relative_path(name)


@given(st.lists(st.sampled_from(["a", "b", ".", "/", "..", "\\", " "]), max_size=30).map("".join))
def test_a_safe_path_never_escapes_the_root(name: str):
    try:
        path = safe_relative_path(name)
    except FetchError:
        return
    assert not path.startswith("/")
    resolved = posixpath.normpath(posixpath.join("/root", path))
    assert resolved.startswith("/root/") and ".." not in path.split("/")


@given(st.lists(st.sampled_from(["a", "é", ".", "/", "..", ".initializer", "\0", "x" * 90]), max_size=12).map("".join))
def test_a_path_is_its_own_segments_normalised_or_refused(name: str):
    """Whatever shortcut a common name takes, the result is the name's non-empty, non-`.` segments, or a refusal."""
    segments = [s for s in name.split("/") if s not in ("", ".")]
    try:
        path = safe_relative_path(name)
    except FetchError:
        assert (
            not segments
            or segments[0] == ".initializer"
            or ".." in segments
            or "\0" in name
            or any(len(s.encode()) > 255 for s in segments)
            or name.startswith("/")
        )
        return
    assert path == "/".join(segments)


def _file(path: str, size: int = 1) -> RemoteFile:
    return RemoteFile(path, size, "v", "key/" + path)


def build_plan(files: list[RemoteFile], ignore: tuple[str, ...], source: str) -> list[RemoteFile]:
    """The plan as the index holds it at the end of a listing: selected, checked, in path order."""
    selection = Selection(Config(ignore_patterns=ignore), DATASET, get_logger("test"))
    with tempfile.TemporaryDirectory() as scratch:
        index = PlanIndex(Path(scratch) / "index.sqlite")
        try:
            for _ in plan_files(selection.filter(files), source, index.plan):
                pass
            return [file for file, _ in index.planned()]
        finally:
            index.close()


def test_plan_filters_sorts_and_normalises():
    plan = build_plan([_file("b//c"), _file("a.bin"), _file("a.txt")], ("*.bin",), "s3://x")
    assert [f.path for f in plan] == ["a.txt", "b/c"]
    assert plan[1].locator == "key/b//c"


def test_plan_refuses_collisions_and_file_folder_clashes_whichever_comes_first():
    with pytest.raises(FetchError, match="both map to 'a/b'"):
        build_plan([_file("a/b"), _file("a//b")], (), "s3://x")
    with pytest.raises(FetchError, match="'a' would have to be both a file and a folder"):
        build_plan([_file("a"), _file("a/b")], (), "s3://x")
    with pytest.raises(FetchError, match="'a/b' would have to be both a file and a folder"):
        build_plan([_file("a/b/c"), _file("a/b0"), _file("a/b")], (), "s3://x")
    assert len(build_plan([_file("a/b0"), _file("a/b.c"), _file("a/b-")], (), "s3://x")) == 3


@pytest.mark.parametrize(
    ("first", "last", "refusal"),
    [("m", "m/x", "'m' would have to be both a file and a folder"),
     ("m/x/y", "m/x", "'m/x' would have to be both a file and a folder"),
     ("m/x", "m//x", "both map to 'm/x'")],
)  # fmt: skip
def test_plan_refuses_collisions_and_clashes_listed_thousands_of_files_apart(first: str, last: str, refusal: str):
    """The plan is checked a batch at a time: a refusal must not depend on the two files sharing a batch."""
    filler = [_file(f"f{i:05d}") for i in range(5000)]
    with pytest.raises(FetchError, match=refusal):
        build_plan([_file(first), *filler, _file(last)], (), "s3://x")
    assert len(build_plan([_file(first), *filler], (), "s3://x")) == 5001


def test_the_longest_name_filesystems_take_is_accepted():
    assert safe_relative_path("d/" + "x" * 255) == "d/" + "x" * 255


def test_plan_refuses_to_be_empty():
    with pytest.raises(FetchError, match=r"all 1 files are excluded by IGNORE_PATTERNS '\*.bin'"):
        build_plan([_file("a.bin")], ("*.bin",), "s3://x")
    with pytest.raises(FetchError, match="s3://x has no files"):
        build_plan([], (), "s3://x")


@settings(max_examples=60)
@given(st.lists(st.text(st.sampled_from(["a", "b", "/", "."]), min_size=1, max_size=8), max_size=12))
def test_a_plan_never_maps_two_files_onto_one_path(names: list[str]):
    try:
        plan = build_plan([_file(n) for n in names], (), "s3://x")
    except FetchError:
        return
    paths = [f.path for f in plan]
    assert len(paths) == len(set(paths))
    for path in paths:
        assert not any(other.startswith(path + "/") for other in paths)


@pytest.mark.parametrize(
    ("uri", "repo", "revision", "sub"),
    [
        ("hf://org/name", "org/name", None, ""),
        ("hf://org/name@v1.0", "org/name", "v1.0", ""),
        ("hf://org/name@refs%2Fpr%2F1/data/train", "org/name", "refs/pr/1", "data/train"),
        ("hf://org/name@refs/pr/1/data/train", "org/name", "refs/pr/1", "data/train"),  # as huggingface_hub writes it
        ("hf://org/name/config.json", "org/name", None, "config.json"),
        ("hf://org/name@" + "a" * 40 + "/sub/", "org/name", "a" * 40, "sub"),
        ("hf://org/name/file@1.txt", "org/name", None, "file@1.txt"),
        ("HF://org/name", "org/name", None, ""),  # the scheme in any case, as s3://
    ],
)
def test_hf_uris(uri: str, repo: str, revision: str | None, sub: str):
    for kind in (DATASET, MODEL):  # Kubeflow's hf://OWNER/NAME: the program's kind of repository
        location = HfLocation.parse(uri, kind)
        assert (location.repo_id, location.revision, location.sub_path) == (repo, revision, sub)
        assert HfLocation.parse(str(location), kind) == location


@pytest.mark.parametrize(
    ("uri", "kind", "meant"),
    [
        ("hf://datasets/org/ds", DATASET, "hf://org/ds"),
        ("hf://models/org/m@v2/sub", MODEL, "hf://org/m@v2/sub"),
        ("https://huggingface.co/org/m", MODEL, "hf://org/m"),
        ("https://huggingface.co/datasets/org/ds", DATASET, "hf://org/ds"),
        ("https://huggingface.co/datasets/org/ds/tree/v1.0", DATASET, "hf://org/ds@v1.0"),
        ("https://huggingface.co/org/m/tree/main/onnx", MODEL, "hf://org/m@main/onnx"),
        ("https://hf.co/org/m/blob/main/config.json", MODEL, "hf://org/m@main/config.json"),
        ("huggingface.co/datasets/org/ds", DATASET, "hf://org/ds"),
    ],
)
def test_huggingface_hubs_forms_and_hub_pages_are_read_as_the_same_repository(uri: str, kind, meant: str):
    assert scheme_of(uri, kind) == "hf"
    assert str(HfLocation.parse(uri, kind)) == meant


@pytest.mark.parametrize(
    ("uri", "kind", "message"),
    [
        ("hf://models/org/m", DATASET, "names a model repository: the model-initializer fetches it; the "
         "dataset-initializer fetches dataset repositories"),
        ("https://huggingface.co/org/m", DATASET, "names a model repository: the model-initializer fetches it"),
        ("hf://datasets/org/ds", MODEL, "names a dataset repository: the dataset-initializer fetches it"),
        ("hf://spaces/org/app", MODEL, "names a space on the Hub; the model-initializer fetches model repositories"),
        ("hf://dataset/org/ds", DATASET, "Type prefix must be plural, got 'dataset/'. Did you mean 'datasets/'?"),
        ("https://huggingface.co/org/m/commits/main", MODEL, "unsupported '/commits/' route"),
    ],
)  # fmt: skip
def test_a_hub_uri_of_the_other_kind_or_no_repository_names_the_form_to_use(uri: str, kind, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)):
        HfLocation.parse(uri, kind)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("hf://", "Empty body after 'hf://'"),
        ("hf://org", "Repository id must be 'namespace/name', got 'org'"),
        ("hf://org/", "Repository id must be 'namespace/name'"),
        ("hf:///name", "Repository id must be 'namespace/name'"),
        ("hf://org/name@", "Empty revision after '@'"),
        ("hf://org/name/a//b", "Path must not contain empty segments"),
        ("hf://org/name/../x", "'.' or '..' segment"),
        ("hf://org/na me", "Repo id must use alphanumeric chars"),
    ],
)
def test_bad_hf_uris(uri: str, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        HfLocation.parse(uri, MODEL)
    assert str(caught.value).startswith(f"STORAGE_URI: {uri!r} ")


_segment = st.text(st.sampled_from("abcXYZ09-_.~ %@+"), min_size=1, max_size=8)


@given(st.text(max_size=40))
def test_any_storage_uri_parses_or_fails_with_a_config_error(uri: str):
    for parse in (S3Location.parse, lambda uri: HfLocation.parse(uri, DATASET)):
        try:
            parse(uri)
        except ConfigError as exc:
            assert "STORAGE_URI" in str(exc)


def _valid_repo_name(name: str) -> bool:
    """As the Hub names repositories (huggingface_hub's own rule)."""
    try:
        validate_repo_id(f"org/{name}")
    except HFValidationError:
        return False
    return True


_name = st.text(st.sampled_from("abcXYZ09-_."), min_size=1, max_size=8).filter(_valid_repo_name)


@given(
    st.builds(
        HfLocation,
        st.builds("{}/{}".format, _name, _name),
        st.none() | _segment,
        st.lists(_segment.filter(lambda s: s not in (".", "..")), max_size=3).map("/".join),
    )
)
def test_hf_locations_survive_their_text_form(location: HfLocation):
    assert HfLocation.parse(str(location), MODEL) == location


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters=",/ \x1c\x1d\x1e\x1f\x85\xa0"),
            min_size=1,
        ),
        max_size=6,
    )
)
def test_a_pattern_list_survives_the_comma_joined_form(patterns: list[str]):
    config = Config(ignore_patterns=tuple(patterns))
    assert Config.from_env(config.to_env()).ignore_patterns == tuple(patterns)


@given(
    st.lists(st.sampled_from(["*.bin", "a/*", "logs/", "[ab]*", "x?.pt"]), max_size=4),
    st.text(st.sampled_from("ab/.xgoslpnt*?"), max_size=12),
)
def test_ignore_patterns_agree_with_fnmatch(patterns: list[str], path: str):
    import fnmatch

    expected = any(fnmatch.fnmatchcase(path, p + "*" if p.endswith("/") else p) for p in patterns)
    assert Globs(patterns).match(path) is expected
