"""What a run does with what OUTPUT_PATH holds when it fails before any file lands: it leaves it as it found it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import ANY

import pytest

from devkit.hubserver import HubServer
from devkit.programs import ProgramResult, run_program
from initializers.destination.locking import RunLock
from initializers.destination.output_path import Destination


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo("org/m", {"config.json": b"{}", "model.safetensors": b"S" * 1000})
        server.add_repo("org/other", {"config.json": b'{"other": 1}', "model.safetensors": b"O" * 500})
        yield server


def fetch(hub: HubServer, uri: str, output: Path, **extra: str) -> ProgramResult:
    env = {"STORAGE_URI": uri, "OUTPUT_PATH": str(output), "HF_ENDPOINT": hub.endpoint, **extra}
    return run_program("model", env)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root`, with a file's bytes (None for a folder)."""
    return {p.relative_to(root).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def test_a_repo_not_found_leaves_no_output_path_it_made(hub: HubServer, tmp_path: Path):
    output = tmp_path / "new" / "model"
    result = fetch(hub, "hf://org/no-such-repo", output)
    assert result.code == 1 and "not found" in result.last["error"]
    assert not output.exists(), "the run made OUTPUT_PATH, and removed it"
    assert (tmp_path / "new").exists(), "what it was given (the parent) stays: only what it made goes"  # mkdir -p


def test_a_refused_connection_leaves_a_users_folder_as_it_was(tmp_path: Path):
    output = tmp_path / "model"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    env = {"STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(output), "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = run_program("model", env)
    assert result.code == 1 and "does not answer" in result.last["error"]
    assert snapshot(output) == {"notes.txt": b"mine"}


def test_a_failure_before_the_first_file_puts_the_manifest_it_withdrew_back(hub: HubServer, tmp_path: Path):
    output = tmp_path / "model"
    assert fetch(hub, "hf://org/m", output).code == 0
    before = snapshot(output)
    hub.commit("org/m", {"model.safetensors": b"T" * 1000})
    hub.corrupt.add(("org/m", "model.safetensors"))  # every attempt misses the checksum: nothing lands
    try:
        result = fetch(hub, "hf://org/m", output)
    finally:
        hub.corrupt.clear()
    assert result.code == 1 and "checksum" in result.last["error"]
    assert result.named("fetching"), "the run got as far as withdrawing the manifest"
    after = snapshot(output)
    kept = [path for path in after if path.startswith(".initializer/tmp/")]
    assert all(path.endswith((".part", ".part.ranges")) for path in kept), "only partials, for a re-run to resume"
    assert {path: after[path] for path in after if path not in kept} == {
        **before,
        ".initializer/lock": ANY,
    }  # it names its holder


def test_a_failure_after_a_file_landed_keeps_what_a_rerun_resumes_from(hub: HubServer, tmp_path: Path):
    output = tmp_path / "model"
    hub.add_repo("org/half", {"config.json": b"{}", "model.safetensors": b"H" * 1000})
    hub.corrupt.add(("org/half", "model.safetensors"))
    try:
        failed = fetch(hub, "hf://org/half", output, MAX_WORKERS="1")
    finally:
        hub.corrupt.clear()
    assert failed.code == 1
    assert (output / "config.json").read_bytes() == b"{}"
    assert (output / ".initializer" / "journal.jsonl").exists(), "the journal says what landed"
    again = fetch(hub, "hf://org/half", output)
    assert again.code == 0 and again.last["fetched_files"] == 1


def test_a_lock_file_removed_while_held_is_not_in_place(tmp_path: Path):
    """What a run waiting for a lock checks once it holds it: a run that failed early removes the lock files it
    made while holding them, and the waiter then holds a lock on a file no other run will ever look at."""
    destination = Destination(tmp_path, tmp_path / ".initializer" / "tmp")
    lock = RunLock(destination, tmp_path / ".initializer", None, tmp_path / ".initializer")
    lock.take(lambda _holder, _seconds: None)
    try:
        assert lock.in_place()
        os.unlink(tmp_path / ".initializer" / "lock")
        assert not lock.in_place()
        (tmp_path / ".initializer" / "lock").write_text("another run's")
        assert not lock.in_place()
    finally:
        lock.release()
        destination.close_folders()


def test_another_source_into_a_folder_holding_one_is_refused(hub: HubServer, tmp_path: Path):
    output = tmp_path / "model"
    assert fetch(hub, "hf://org/m", output).code == 0
    before = snapshot(output)
    result = fetch(hub, "hf://org/other", output)
    assert result.code == 2
    assert result.last["error"] == (
        f"OUTPUT_PATH '{output}' holds hf://org/m (fetched by the model-initializer), as its manifest says; fetching "
        "hf://org/other into it would mix the two: choose another OUTPUT_PATH, or set REPLACE_EXISTING=true to "
        "replace those files with these"
    )
    assert snapshot(output) == {**before, ".initializer/lock": ANY}


def test_the_same_source_at_another_revision_is_no_other_source(hub: HubServer, tmp_path: Path):
    output = tmp_path / "model"
    assert fetch(hub, "hf://org/other", output).code == 0
    pinned = fetch(hub, f"hf://org/other@{_commit(output)}", output)
    assert pinned.code == 0, pinned.last


def _commit(output: Path) -> str:
    return json.loads((output / ".initializer" / "manifest.json").read_text())["source"]["commit"]


def test_replace_existing_removes_the_other_sources_files_and_only_them(hub: HubServer, tmp_path: Path):
    output = tmp_path / "model"
    hub.add_repo("org/nested", {"config.json": b'{"n": 1}', "sub/deep/w.safetensors": b"N" * 10})
    assert fetch(hub, "hf://org/nested", output).code == 0
    (output / "sub" / "notes.txt").write_text("mine")  # the user's, in a folder of the other source's
    result = fetch(hub, "hf://org/other", output, REPLACE_EXISTING="true")
    assert result.code == 0, result.last
    assert result.named("replaced another source") == [ANY]
    assert result.named("replaced another source")[0]["removed_files"] == 2
    files = {path: data for path, data in snapshot(output).items() if data is not None}
    assert {path: data for path, data in files.items() if not path.startswith(".initializer/")} == {
        "config.json": b'{"other": 1}',
        "model.safetensors": b"O" * 500,
        "sub/notes.txt": b"mine",
    }
    assert not (output / "sub" / "deep").exists(), "a folder the removal emptied goes too"
    assert json.loads((output / ".initializer" / "manifest.json").read_text())["source"]["uri"] == "hf://org/other"
