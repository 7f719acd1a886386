"""What a run finds already in OUTPUT_PATH: links planted there (leading out of it, or in loops), a file where a
folder is needed, a folder where a file goes. Nothing outside OUTPUT_PATH is ever written, truncated or deleted,
nothing found there is removed to make room, and each case ends in exit 1 naming the path (no traceback).

Real runs: S3 datasets from SeaweedFS, a sentence-transformers-shaped model from our Hub server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.programs import ProgramResult, run_program
from devkit.seaweed import SeaweedFS
from initializers.destination.output_path import Destination
from initializers.destination.state import StateDir

OBJECTS = {"d/00.bin": b"zero" * 100, "d/sub/01.bin": b"one" * 100, "top.bin": b"top"}


@pytest.fixture
def dataset(s3: Any, bucket: str) -> str:
    """OBJECTS in a fresh bucket, listed from its root: top-level files and nested folders both."""
    uploads = [s3.put_object(Bucket=bucket, Key=key, Body=body) for key, body in OBJECTS.items()]
    assert {upload["ResponseMetadata"]["HTTPStatusCode"] for upload in uploads} == {200}
    return f"s3://{bucket}"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside OUTPUT_PATH that links lead to, with files a careless run would clobber."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim").write_bytes(b"precious")
    (folder / "leftover.part").write_bytes(b"not a temporary of ours")
    (folder / "config.json").write_bytes(b'{"mine": true}')
    return folder


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder`: a file's bytes, a link's target, a folder's presence."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = "folder"
        else:
            found[name] = path.read_bytes()
    return found


def fetch(seaweed: SeaweedFS, uri: str, output: Path) -> ProgramResult:
    return run_program("dataset", {**seaweed.env(), "STORAGE_URI": uri, "OUTPUT_PATH": str(output)})


def assert_refused(result: ProgramResult, path: Path, why: str) -> None:
    assert result.code == 1, result.stderr
    assert str(path) in result.last["error"] and why in result.last["error"], result.last
    assert "Traceback" not in result.stderr and "internal error" not in result.last["error"]


def no_manifest(output: Path) -> bool:
    return not (output / ".initializer" / "manifest.json").exists()


LINK = "is a symbolic link"


@pytest.mark.parametrize("planted", [".initializer", ".initializer/tmp", "d", "d/sub"])
def test_a_folder_that_is_a_link_out_of_output_path_is_refused_and_nothing_outside_changes(
    seaweed: SeaweedFS, dataset: str, outside: Path, tmp_path: Path, planted: str
):
    output = tmp_path / "out"
    (output / planted).parent.mkdir(parents=True, exist_ok=True)
    (output / planted).symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    result = fetch(seaweed, dataset, output)
    assert_refused(result, output / planted, LINK)
    assert snapshot(outside) == before, "temporaries, leftover cleanup and files must not reach outside"
    assert (output / planted).is_symlink(), "what the user put there stays"
    assert no_manifest(output)


def test_a_model_folder_linked_out_of_output_path_gets_no_config_written_through_it(outside: Path, tmp_path: Path):
    output = tmp_path / "model"
    output.mkdir()
    (output / "1_Pooling").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    with HubServer() as hub:
        hub.add_repo("org/st", {"config.json": b"{}", "1_Pooling/config.json": b'{"pooling": "mean"}',
                                "model.safetensors": b"weights"})  # fmt: skip
        result = run_program("model", {"STORAGE_URI": "hf://org/st", "HF_ENDPOINT": hub.endpoint,
                                       "OUTPUT_PATH": str(output)})  # fmt: skip
    assert_refused(result, output / "1_Pooling", LINK)
    assert snapshot(outside) == before
    assert no_manifest(output)


@pytest.mark.parametrize("planted", [".initializer/lock", "d/00.bin", "top.bin"])
def test_a_file_that_is_a_link_is_neither_written_through_nor_replaced(
    seaweed: SeaweedFS, dataset: str, outside: Path, tmp_path: Path, planted: str
):
    output = tmp_path / "out"
    (output / planted).parent.mkdir(parents=True, exist_ok=True)
    (output / planted).symlink_to(outside / "victim")
    before = snapshot(outside)
    result = fetch(seaweed, dataset, output)
    assert_refused(result, output / planted, LINK)
    assert snapshot(outside) == before
    assert os.readlink(output / planted) == str(outside / "victim")
    assert no_manifest(output)


STATE_FILES = [".initializer/tmp/manifest.json.tmp", ".initializer/tmp/journal.jsonl.tmp", ".initializer/manifest.json",
               ".initializer/journal.jsonl", ".initializer/index.sqlite"]  # fmt: skip


@pytest.mark.parametrize("planted", STATE_FILES)
def test_a_link_planted_at_a_state_file_is_replaced_never_followed(
    seaweed: SeaweedFS, dataset: str, outside: Path, tmp_path: Path, planted: str
):
    """State files and their temporaries are ours: a link at their name is replaced (renamed over, or unlinked and
    made afresh), its target untouched."""
    output = tmp_path / "out"
    (output / planted).parent.mkdir(parents=True)
    (output / planted).symlink_to(outside / "victim")
    before = snapshot(outside)
    result = fetch(seaweed, dataset, output)
    assert result.code == 0, result.last
    assert snapshot(outside) == before
    assert (output / "d" / "00.bin").read_bytes() == OBJECTS["d/00.bin"]
    assert not no_manifest(output)


@pytest.mark.parametrize("planted", ["d", ".initializer", ".initializer/tmp"])
def test_a_link_loop_where_a_folder_goes_is_refused_without_a_traceback(
    seaweed: SeaweedFS, dataset: str, tmp_path: Path, planted: str
):
    output = tmp_path / "out"
    (output / planted).parent.mkdir(parents=True, exist_ok=True)
    (output / planted).symlink_to(os.path.basename(planted))  # a link to itself: following it loops
    result = fetch(seaweed, dataset, output)
    assert_refused(result, output / planted, LINK)
    assert no_manifest(output)


def test_a_link_loop_the_plan_does_not_touch_is_left_alone(seaweed: SeaweedFS, dataset: str, tmp_path: Path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "loop").symlink_to("loop")
    result = fetch(seaweed, dataset, output)
    assert result.code == 0, result.last
    assert os.readlink(output / "loop") == "loop"


def test_a_file_where_a_folder_is_needed_is_refused_and_kept(seaweed: SeaweedFS, dataset: str, tmp_path: Path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "d").write_bytes(b"the user's file")
    result = fetch(seaweed, dataset, output)
    assert_refused(result, output / "d", "a file of that name is in the way")
    assert (output / "d").read_bytes() == b"the user's file"
    assert no_manifest(output)


def test_a_folder_where_a_file_goes_is_refused_and_kept(seaweed: SeaweedFS, dataset: str, tmp_path: Path):
    output = tmp_path / "out"
    (output / "d" / "00.bin").mkdir(parents=True)
    (output / "d" / "00.bin" / "inside").write_bytes(b"kept")
    result = fetch(seaweed, dataset, output)
    assert_refused(result, output / "d" / "00.bin", "a folder of that name is in the way")
    assert (output / "d" / "00.bin" / "inside").read_bytes() == b"kept"
    assert no_manifest(output)


def test_output_path_itself_may_be_a_link(seaweed: SeaweedFS, dataset: str, outside: Path, tmp_path: Path):
    """OUTPUT_PATH is the configuration: a link there is where the user asked the files to go."""
    (tmp_path / "out").symlink_to(outside, target_is_directory=True)
    result = fetch(seaweed, dataset, tmp_path / "out")
    assert result.code == 0, result.last
    assert (outside / "d" / "sub" / "01.bin").read_bytes() == OBJECTS["d/sub/01.bin"]
    assert (outside / "victim").read_bytes() == b"precious"


def test_the_writability_probe_leaves_a_link_planted_at_a_name_it_might_take_and_what_it_points_to(
    tmp_path: Path, outside: Path
):
    """The probe's name carries a random token (two initializers in containers on one volume are both PID 1): a
    link planted at `.probe-<pid>` is neither followed nor removed, and the probe itself leaves nothing behind."""
    state = StateDir(str(tmp_path / "out"))
    state.tmp.mkdir(parents=True)
    planted = state.tmp / f".probe-{os.getpid()}"
    planted.symlink_to(outside / "victim")
    with state.session(lambda holder, seconds: None):
        pass
    assert (outside / "victim").read_bytes() == b"precious"
    assert sorted(entry.name for entry in state.tmp.iterdir()) == [planted.name]


def test_a_state_file_made_where_a_link_stands_replaces_the_link_and_never_truncates_its_target(
    tmp_path: Path, outside: Path
):
    root = tmp_path / "out"
    destination = Destination(root, root / "tmp")
    (root / "tmp").mkdir(parents=True)
    (root / "tmp" / "state").symlink_to(outside / "victim")
    destination.new_file(root / "tmp" / "state", lambda fd: os.write(fd, b"ours"))
    destination.close_folders()
    assert (outside / "victim").read_bytes() == b"precious"
    assert not (root / "tmp" / "state").is_symlink()
    assert (root / "tmp" / "state").read_bytes() == b"ours"
