"""The Hub source end to end: the real programs against our protocol-faithful Hub server."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from devkit.hubserver import HubServer
from devkit.outputs import manifest, tree
from devkit.programs import ProgramResult, run_program, start_program
from devkit.relay import Relay, self_signed_certificate
from devkit.samples import MINILM_NOT_LOADED, MINILM_REPO, minilm_files

TOKEN = "hf_private_reader_5d1c9e77"  # distinctive, so tests can prove it never leaks
GATED_TOKEN = "hf_gated_reader_0a8b2f11"
DATASET_V1 = {"README.md": b"# ds\n", "data/train/0.jsonl": b'{"a": 1}\n', "data/train/1.jsonl": b'{"a": 2}\n',
              "data/test.jsonl": b'{"a": 3}\n', "meta/info.txt": b"v1"}  # fmt: skip
DATASET_V2 = {"data/train/0.jsonl": b'{"a": 10}\n', "extra.txt": b"v2"}
BOTH = {"config.json": b"{}", "model.safetensors": b"S" * 300, "pytorch_model.bin": b"B" * 200, "tf_model.h5": b"H"}
BIN_ONLY = {"config.json": b"{}", "pytorch_model.bin": b"B" * 200, "tf_model.h5": b"H", "sub/optimizer.pt": b"P"}
SHARDS = {f"model-{i:05d}-of-00004.safetensors": os.urandom(3 * 1024 * 1024 + i) for i in range(4)}


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(MINILM_REPO, minilm_files())
        server.add_repo("org/ds", DATASET_V1, repo_type="dataset")
        server.tag("org/ds", "v1", "main", repo_type="dataset")
        server.branch("org/ds", "feature/x", "main", repo_type="dataset")
        server.commit("org/ds", DATASET_V2, repo_type="dataset")
        server.add_repo("org/both", BOTH)
        server.add_repo("org/bin-only", BIN_ONLY)
        server.add_repo("org/shards", SHARDS)
        server.add_repo("org/private", {"config.json": b'{"private": true}', "w.safetensors": b"W" * 100}, private=True)
        server.add_repo("org/gated", {"data.csv": b"a,b\n"}, repo_type="dataset", gated=True)
        server.tokens[TOKEN] = {"org/private"}
        server.tokens[GATED_TOKEN] = {"org/gated"}
        yield server


def hub_env(hub: HubServer, uri: str, output: Path, **extra: str) -> dict[str, str]:
    # HOME is a file: any attempt to write under it fails, as in a container with an arbitrary UID.
    home = output.parent / "home-is-a-file"
    home.touch()
    return {"STORAGE_URI": uri, "OUTPUT_PATH": str(output), "HF_ENDPOINT": hub.endpoint, "HOME": str(home), **extra}


def fetch(hub: HubServer, kind: str, uri: str, output: Path, **extra: str) -> ProgramResult:
    return run_program(kind, hub_env(hub, uri, output, **extra))


def test_model_repo_with_lfs_weights(hub: HubServer, tmp_path: Path):
    result = fetch(hub, "model", f"hf://{MINILM_REPO}", tmp_path / "m")
    assert result.code == 0, result.stdout + result.stderr
    loaded = {path: source.read_bytes() for path, source in minilm_files().items() if path not in MINILM_NOT_LOADED}
    assert tree(tmp_path / "m") == loaded
    recorded = manifest(tmp_path / "m")
    assert len(recorded["source"]["commit"]) == 40 and recorded["source"]["revision"] == "main"
    by_path = {f["path"]: f for f in recorded["files"]}
    assert by_path["model.safetensors"]["checksum"]["algorithm"] == "sha256"
    assert by_path["config.json"]["checksum"]["algorithm"] == "git-sha1"
    assert {p.name for p in (tmp_path / "m" / ".initializer").iterdir()} == {"lock", "manifest.json", "tmp"}
    assert any(r.origin == "cdn" for r in hub.requests), "LFS files are served by the second origin"


@pytest.mark.parametrize(
    ("revision", "expected"),
    [
        ("", {**DATASET_V1, **DATASET_V2}),
        ("@v1", DATASET_V1),
        ("@feature%2Fx", DATASET_V1),
    ],
)
def test_dataset_revisions_by_branch_and_tag(hub: HubServer, tmp_path: Path, revision: str, expected: dict):
    result = fetch(hub, "dataset", f"hf://org/ds{revision}", tmp_path / "d")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "d") == expected


def test_each_file_is_one_get_without_a_head(hub: HubServer, tmp_path: Path):
    """huggingface_hub asks HEAD before each GET; the tree listing already gave us sizes and digests."""
    before = len(hub.requests)
    assert fetch(hub, "model", "hf://org/shards", tmp_path / "out").code == 0
    downloads = [r for r in hub.requests[before:] if "/resolve/" in r.path or r.origin == "cdn"]
    assert not [r for r in downloads if r.method == "HEAD"]
    assert sorted(r.origin for r in downloads if r.method == "GET") == ["cdn"] * 4 + ["hub"] * 4  # LFS: redirected


def test_revision_by_commit_and_by_variable(hub: HubServer, tmp_path: Path):
    first = fetch(hub, "dataset", "hf://org/ds", tmp_path / "a", REVISION="v1")
    assert first.code == 0 and tree(tmp_path / "a") == DATASET_V1
    commit = manifest(tmp_path / "a")["source"]["commit"]
    pinned = fetch(hub, "dataset", f"hf://org/ds@{commit}", tmp_path / "b", REVISION="main")  # the URI wins
    assert pinned.code == 0 and tree(tmp_path / "b") == DATASET_V1
    assert manifest(tmp_path / "b")["source"]["commit"] == commit


def test_sub_path_folder_and_file_keep_their_repo_paths(hub: HubServer, tmp_path: Path):
    folder = fetch(hub, "dataset", "hf://org/ds@v1/data/train", tmp_path / "f")
    assert folder.code == 0, folder.stderr
    assert tree(tmp_path / "f") == {k: v for k, v in DATASET_V1.items() if k.startswith("data/train/")}
    single = fetch(hub, "dataset", "hf://org/ds/meta/info.txt", tmp_path / "s")
    assert single.code == 0, single.stderr
    assert tree(tmp_path / "s") == {"meta/info.txt": b"v1"}


@pytest.mark.parametrize(
    ("repo", "patterns", "expected"),
    [
        ("org/both", None, {"config.json", "model.safetensors"}),
        ("org/both", "", {"config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5"}),
        ("org/both", "*.safetensors", {"config.json", "pytorch_model.bin", "tf_model.h5"}),
        ("org/bin-only", None, {"config.json", "pytorch_model.bin", "sub/optimizer.pt"}),
        ("org/bin-only", "*.bin,*.pt", {"config.json", "tf_model.h5"}),
    ],
)
def test_model_ignore_patterns_and_the_bin_fallback(
    hub: HubServer, tmp_path: Path, repo: str, patterns: str | None, expected: set[str]
):
    extra = {} if patterns is None else {"IGNORE_PATTERNS": patterns}
    result = fetch(hub, "model", f"hf://{repo}", tmp_path / "m", **extra)
    assert result.code == 0, result.stderr
    assert set(tree(tmp_path / "m")) == expected
    assert bool(result.named("keeping .bin/.pt/.pth weights")) == (repo == "org/bin-only" and patterns is None)


def test_private_repo_needs_the_right_token_and_the_token_never_leaks(hub: HubServer, tmp_path: Path):
    denied = fetch(hub, "model", "hf://org/private", tmp_path / "no")
    assert denied.code == 1
    assert "not found or is not accessible" in denied.last["error"] and "ACCESS_TOKEN" in denied.last["error"]
    allowed = fetch(hub, "model", "hf://org/private", tmp_path / "yes", ACCESS_TOKEN=TOKEN, LOG_LEVEL="debug")
    assert allowed.code == 0, allowed.stderr
    assert tree(tmp_path / "yes") == {"config.json": b'{"private": true}', "w.safetensors": b"W" * 100}
    via_hf_token = fetch(hub, "model", "hf://org/private", tmp_path / "hf", HF_TOKEN=TOKEN)
    assert via_hf_token.code == 0
    for result in (denied, allowed, via_hf_token):
        assert TOKEN not in result.stdout + result.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert not any(r.authorized for r in hub.requests if r.origin == "cdn"), "the token never reaches the CDN"


@pytest.mark.parametrize("where", ["HF_HOME", "HF_TOKEN_PATH"])
def test_the_token_hf_auth_login_saved_is_used_when_none_is_configured(hub: HubServer, tmp_path: Path, where: str):
    """As `hf download` does: huggingface_hub's token file, under HF_HOME or at HF_TOKEN_PATH; named, never shown."""
    home = tmp_path / "hf-home"
    home.mkdir()
    token_file = home / "token" if where == "HF_HOME" else tmp_path / "elsewhere-token"
    token_file.write_text(TOKEN)  # as `hf auth login` writes it
    saved = {"HF_HOME": str(home)} if where == "HF_HOME" else {"HF_TOKEN_PATH": str(token_file)}
    result = fetch(hub, "model", "hf://org/private", tmp_path / "m", **saved, LOG_LEVEL="debug")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "m") == {"config.json": b'{"private": true}', "w.safetensors": b"W" * 100}
    assert [event["source"] for event in result.named("hub token")] == [f"huggingface_hub's token file {token_file}"]
    assert TOKEN not in result.stdout + result.stderr
    configured = fetch(hub, "model", "hf://org/private", tmp_path / "c", **saved, ACCESS_TOKEN=GATED_TOKEN)
    assert configured.code == 1 and not configured.named("hub token"), "a configured token wins over the saved one"


def test_huggingface_hubs_older_token_variable_is_honoured_as_it_honours_it(hub: HubServer, tmp_path: Path):
    """HUGGING_FACE_HUB_TOKEN, huggingface_hub's older name for HF_TOKEN, which it still reads: named, never shown."""
    result = fetch(hub, "model", "hf://org/private", tmp_path / "m", HUGGING_FACE_HUB_TOKEN=TOKEN + "\n")
    assert result.code == 0, result.last
    assert tree(tmp_path / "m") == {"config.json": b'{"private": true}', "w.safetensors": b"W" * 100}
    assert [event["source"] for event in result.named("hub token")] == ["HUGGING_FACE_HUB_TOKEN"]
    assert TOKEN not in result.stdout + result.stderr


def test_a_saved_token_the_hub_rejects_is_hidden_in_every_line(hub: HubServer, tmp_path: Path):
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "token").write_text("hf_saved_but_revoked_93b1\n")
    result = fetch(hub, "model", "hf://org/both", tmp_path / "m", HF_HOME=str(home), LOG_LEVEL="debug")
    assert result.code == 1 and "rejected the token" in result.last["error"]
    assert "hf_saved_but_revoked_93b1" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("kind", "uri", "expected"),
    [
        ("dataset", "hf://datasets/org/ds@v1", DATASET_V1),  # huggingface_hub's own form
        ("dataset", "{endpoint}/datasets/org/ds/tree/v1", DATASET_V1),  # a Hub page, pasted from a browser
        ("dataset", "{endpoint}/datasets/org/ds/tree/v1/data/train",
         {k: v for k, v in DATASET_V1.items() if k.startswith("data/train/")}),
        ("model", "hf://models/org/both", {"config.json": b"{}", "model.safetensors": b"S" * 300}),
        ("model", "{endpoint}/org/both", {"config.json": b"{}", "model.safetensors": b"S" * 300}),
    ],
)  # fmt: skip
def test_huggingface_hubs_uris_and_hub_pages_fetch_the_repository(
    hub: HubServer, tmp_path: Path, kind: str, uri: str, expected: dict
):
    result = fetch(hub, kind, uri.format(endpoint=hub.endpoint), tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == expected
    assert manifest(tmp_path / "out")["source"]["uri"].startswith("hf://org/")  # recorded in Kubeflow's form


def test_a_hub_page_of_the_other_kind_names_the_program_to_use(hub: HubServer, tmp_path: Path):
    result = fetch(hub, "model", f"{hub.endpoint}/datasets/org/ds", tmp_path / "out")
    assert result.code == 2
    assert result.last["error"] == (
        f"STORAGE_URI: '{hub.endpoint}/datasets/org/ds' names a dataset repository: the dataset-initializer fetches "
        "it; the model-initializer fetches model repositories"
    )
    assert not (tmp_path / "out").exists()


def test_gated_repo_and_invalid_token(hub: HubServer, tmp_path: Path):
    gated = fetch(hub, "dataset", "hf://org/gated", tmp_path / "g")
    assert gated.code == 1
    assert "is gated" in gated.last["error"]
    granted = fetch(hub, "dataset", "hf://org/gated", tmp_path / "ok", ACCESS_TOKEN=GATED_TOKEN)
    assert granted.code == 0 and tree(tmp_path / "ok") == {"data.csv": b"a,b\n"}
    invalid = fetch(hub, "model", "hf://org/both", tmp_path / "i", ACCESS_TOKEN="hf_not_a_real_token_77")
    assert invalid.code == 1
    assert "rejected the token" in invalid.last["error"]
    assert "hf_not_a_real_token_77" not in invalid.stdout + invalid.stderr


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("hf://org/no-such-repo", "not found or is not accessible"),
        ("hf://org/ds@no-such-branch", "has no revision 'no-such-branch'"),
        ("hf://org/ds/no/such/path", "path 'no/such/path' does not exist"),
    ],
)
def test_missing_repo_revision_and_path(hub: HubServer, tmp_path: Path, uri: str, message: str):
    result = fetch(hub, "dataset", uri, tmp_path / "x")
    assert result.code == 1
    assert message in result.last["error"]
    assert not (tmp_path / "x" / ".initializer" / "manifest.json").exists()


def test_a_dataset_uri_given_to_the_model_program_is_not_found(hub: HubServer, tmp_path: Path):
    result = fetch(hub, "model", "hf://org/ds", tmp_path / "x")
    assert result.code == 1 and "model org/ds was not found" in result.last["error"]


def test_tree_listing_over_several_pages(hub: HubServer, tmp_path: Path):
    hub.tree_page_size = 2
    try:
        hub.reset()
        result = fetch(hub, "dataset", "hf://org/ds", tmp_path / "d")
    finally:
        hub.tree_page_size = 1000
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "d") == {**DATASET_V1, **DATASET_V2}
    assert sum(1 for r in hub.requests if "/tree/" in r.path) >= 4


def test_rerun_fetches_nothing(hub: HubServer, tmp_path: Path):
    assert fetch(hub, "model", "hf://org/shards", tmp_path / "m").code == 0
    hub.reset()
    again = fetch(hub, "model", "hf://org/shards", tmp_path / "m")
    assert again.code == 0 and again.named("up to date")
    assert not [r for r in hub.requests if "/resolve/" in r.path or r.origin == "cdn"]
    assert sum(hub.served_bytes.values()) == 0


def test_killed_mid_file_then_rerun_refetches_only_unfinished_files(hub: HubServer, tmp_path: Path):
    output = tmp_path / "m"
    hub.reset()
    hub.pause_after_bytes = pause = 7 * 1024 * 1024  # two whole 3 MiB shards, then 1 MiB into the third
    try:
        process = start_program("model", hub_env(hub, "hf://org/shards", output, MAX_WORKERS="1"))
        deadline = time.monotonic() + 60
        while sum(hub.served_bytes.values()) < pause or len(tree(output) if output.exists() else ()) < 2:
            assert process.poll() is None and time.monotonic() < deadline, "not two files and a part within 60 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        hub.drop_connections()  # the paused answer ends here, not once the pause is lifted
    finally:
        hub.pause_after_bytes = None
    finished = set(tree(output))
    assert len(finished) == 2
    for path in finished:
        assert (output / path).read_bytes() == SHARDS[path]
    assert not (output / ".initializer" / "manifest.json").exists()
    hub.reset()
    result = run_program("model", hub_env(hub, "hf://org/shards", output))
    assert result.code == 0, result.stderr
    assert tree(output) == SHARDS
    cdn_gets = [urlsplit(r.path) for r in hub.requests if r.origin == "cdn" and r.method == "GET"]
    fetched = {parse_qs(url.query)["file"][0] for url in cdn_gets}
    assert fetched == set(SHARDS) - finished
    assert hub.served_bytes["cdn"] == sum(len(SHARDS[name]) for name in fetched)  # no byte of a finished file


def test_a_corrupted_lfs_body_is_detected(hub: HubServer, tmp_path: Path):
    hub.corrupt.add(("org/shards", "model-00002-of-00004.safetensors"))
    try:
        result = fetch(hub, "model", "hf://org/shards", tmp_path / "m")
    finally:
        hub.corrupt.clear()
    assert result.code == 1
    assert "sha256 checksum mismatch" in result.last["error"] and "model-00002-of-00004" in result.last["error"]
    assert "model-00002-of-00004.safetensors" not in tree(tmp_path / "m")
    assert not (tmp_path / "m" / ".initializer" / "manifest.json").exists()


def test_an_unreachable_hub_fails_cleanly_after_retries(tmp_path: Path):
    result = run_program("dataset", {"STORAGE_URI": "hf://org/ds", "OUTPUT_PATH": str(tmp_path / "x"),
                                     "HF_ENDPOINT": "http://127.0.0.1:9"})  # fmt: skip
    assert result.code == 1
    assert result.last["error"] == (  # one sentence: no doubled word, no class name, no errno tag
        "cannot list hf://org/ds after 5 attempts: the Hub at http://127.0.0.1:9 does not answer (Connection refused)"
    )
    assert len(result.named("waiting to retry")) == 4


def test_a_repo_of_20k_files_lists_over_pages_and_fetches(tmp_path: Path):
    files = {f"data/{i % 50:02d}/{i:05d}.json": f'{{"i": {i}}}\n'.encode() for i in range(20_000)}
    with HubServer() as server:
        server.add_repo("org/many", files, repo_type="dataset")
        result = fetch(server, "dataset", "hf://org/many", tmp_path / "out")
        tree_pages = [r for r in server.requests if r.origin == "hub" and "/tree/" in r.path]
        again = fetch(server, "dataset", "hf://org/many", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert result.last["files"] == 20_000 and len(tree_pages) > 1
    assert all((tmp_path / "out" / path).read_bytes() == files[path] for path in list(files)[::997])
    assert manifest(tmp_path / "out")["total_files"] == 20_000
    assert again.code == 0 and again.named("up to date") and again.last["fetched_files"] == 0


def test_a_hub_certificate_that_does_not_verify_names_the_variable_each_hub_path_reads(hub: HubServer, tmp_path: Path):
    """The listing (huggingface_hub, through httpx) and the file downloads (our GETs) both trust SSL_CERT_FILE: a
    certificate failure on either names it, fails at once, and setting it is the fix."""
    cert, key = self_signed_certificate(tmp_path)
    with Relay(hub.endpoint, tls=(cert, key)) as api:
        listing = fetch(hub, "model", "hf://org/shards", tmp_path / "listing", HF_ENDPOINT=api.endpoint)
    with Relay(hub.cdn_endpoint, tls=(cert, key)) as cdn:
        hub.cdn_public_endpoint = cdn.endpoint
        try:
            download = fetch(hub, "model", "hf://org/shards", tmp_path / "download")
            trusted = fetch(hub, "model", "hf://org/shards", tmp_path / "trusted", SSL_CERT_FILE=str(cert))
        finally:
            hub.cdn_public_endpoint = None
    assert listing.last["error"].startswith("cannot list hf://org/shards: ")
    assert download.last["error"].startswith("cannot download ")
    for failed in (listing, download):
        assert failed.code == 1, failed.stdout + failed.stderr
        assert "the server's TLS certificate does not verify" in failed.last["error"]
        assert "for a private CA set SSL_CERT_FILE (or SSL_CERT_DIR)" in failed.last["error"]
        assert "REQUESTS_CA_BUNDLE" not in failed.last["error"] and "AWS_CA_BUNDLE" not in failed.last["error"]
        assert failed.named("waiting to retry") == []  # permanent: no retry can fix it
    assert trusted.code == 0, trusted.stdout + trusted.stderr
    assert tree(tmp_path / "trusted") == SHARDS
