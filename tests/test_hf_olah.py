"""The Hub source against olah, a Hub mirror written by others: the happy path must work there too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.hubserver import is_lfs
from devkit.olah import Olah
from devkit.outputs import tree
from devkit.programs import run_program
from devkit.samples import MINILM_NOT_LOADED, MINILM_REPO, minilm_files


def _model_files() -> dict[str, bytes]:
    return {path: source.read_bytes() for path, source in minilm_files().items()}


DATASET_V1 = {"README.md": b"# tiny\n", "data/train.jsonl": b'{"x": 1}\n', "data/test.jsonl": b'{"x": 2}\n'}
DATASET_V2 = {"data/train.jsonl": b'{"x": 1}\n{"x": 3}\n', "extra/notes.txt": b"v2"}


@pytest.fixture(scope="module")
def olah() -> Iterator[Olah]:
    server = Olah()
    server.add_repo(MINILM_REPO, _model_files(), is_lfs=is_lfs)
    dataset = server.add_repo("org/tiny", DATASET_V1, repo_type="dataset", is_lfs=is_lfs)
    server.tag(dataset, "v1.0")
    server.commit(dataset, DATASET_V2, "second", is_lfs)
    server.start(f"models/{MINILM_REPO}")
    yield server
    server.stop()


def fetch(olah: Olah, kind: str, uri: str, output: Path, **extra: str):
    return run_program(kind, {"STORAGE_URI": uri, "OUTPUT_PATH": str(output), "HF_ENDPOINT": olah.endpoint,
                              "HF_HUB_DISABLE_XET": "1", **extra})  # fmt: skip


def test_model_repo_from_olah(olah: Olah, tmp_path: Path):
    result = fetch(olah, "model", f"hf://{MINILM_REPO}", tmp_path / "model")
    assert result.code == 0, result.stdout + result.stderr
    loaded = {path: body for path, body in _model_files().items() if path not in MINILM_NOT_LOADED}
    assert tree(tmp_path / "model") == loaded
    recorded = json.loads((tmp_path / "model" / ".initializer" / "manifest.json").read_text())
    assert len(recorded["source"]["commit"]) == 40
    weights = next(f for f in recorded["files"] if f["path"] == "model.safetensors")
    assert weights["checksum"]["algorithm"] == "sha256" and weights["size"] == 90868376
    # olah answers a Range with the whole file: the probe notices, and each file comes in one stream.
    assert result.named("range probe")[0]["ranges"] is False
    assert {p.name for p in (tmp_path / "model" / ".initializer").iterdir()} == {"lock", "manifest.json", "tmp"}


def test_dataset_repo_branch_tag_and_sub_path_from_olah(olah: Olah, tmp_path: Path):
    latest = fetch(olah, "dataset", "hf://org/tiny", tmp_path / "latest")
    assert latest.code == 0, latest.stderr
    assert tree(tmp_path / "latest") == {**DATASET_V1, **DATASET_V2}
    tagged = fetch(olah, "dataset", "hf://org/tiny@v1.0", tmp_path / "tagged")
    assert tagged.code == 0, tagged.stderr
    assert tree(tmp_path / "tagged") == DATASET_V1
    sub = fetch(olah, "dataset", "hf://org/tiny/data", tmp_path / "sub", REVISION="v1.0")
    assert sub.code == 0, sub.stderr
    assert tree(tmp_path / "sub") == {"data/train.jsonl": b'{"x": 1}\n', "data/test.jsonl": b'{"x": 2}\n'}
    one = fetch(olah, "dataset", "hf://org/tiny/data/train.jsonl", tmp_path / "one")
    assert one.code == 0, one.stderr
    assert tree(tmp_path / "one") == {"data/train.jsonl": DATASET_V2["data/train.jsonl"]}
