"""PlanIndex, the run's plan in SQLite: what earlier runs finished, the plan in path order, a split into shares.
(Collisions and file/folder clashes: tests/test_uris_patterns_paths.py; balance by bytes: tests/test_shares.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.done import DoneFile
from initializers.plan.index import PlanIndex


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PlanIndex]:
    index = PlanIndex(tmp_path / "index.sqlite")
    yield index
    index.close()


def remote(path: str, size: int = 10, version: str = "v1", **fields: Any) -> RemoteFile:
    return RemoteFile(path, size, version, f"key/{path}", **fields)


def test_a_new_index_starts_empty_and_is_removed_when_closed(tmp_path: Path) -> None:
    (tmp_path / "index.sqlite").write_text("left by a run that was killed")
    index = PlanIndex(tmp_path / "index.sqlite")
    assert list(index.planned()) == [] and index.totals() == (0, 0)
    index.close()
    assert not (tmp_path / "index.sqlite").exists()


def test_planned_files_come_back_in_path_order_as_listed(index: PlanIndex) -> None:
    files = [
        remote("b/x.bin", checksum=Checksum("sha256", "ab" * 32)),
        remote("a.bin", 5, exact_size=False),
        remote("b/a.bin"),
    ]
    index.plan(files[:1])
    index.plan(files[1:])
    assert [file for file, _ in index.planned()] == sorted(files)
    assert all(done is None for _, done in index.planned()), "nothing is finished yet"


def test_a_finished_file_is_found_only_at_the_size_and_version_offered_now(index: PlanIndex) -> None:
    index.add_finished([DoneFile("a", 10, "v1", 1), DoneFile("b", 10, "v1", 2), DoneFile("c", 10, "v1", 3)], False)
    offered = [remote("a"), remote("b", 11), remote("c", version="v2"), remote("d")]
    assert index.finished_among(offered) == {"a": (DoneFile("a", 10, "v1", 1), False)}
    produced = remote("b", 11, exact_size=False)  # its size was an estimate: the size written is what counts
    assert index.finished_among([produced]) == {"b": (DoneFile("b", 10, "v1", 2), False)}


def test_the_journal_replaces_the_manifests_record_which_keeps_its_claim_only_if_they_agree(index: PlanIndex) -> None:
    index.add_finished([DoneFile("same", 10, "v1", 1), DoneFile("moved", 10, "v1", 1)], in_manifest=True)
    index.add_finished([DoneFile("same", 10, "v1", 1), DoneFile("moved", 10, "v1", 2, "sha256", "cd")], False)
    found = index.finished_among([remote("same"), remote("moved")])
    assert found == {
        "same": (DoneFile("same", 10, "v1", 1), True),
        "moved": (DoneFile("moved", 10, "v1", 2, "sha256", "cd"), False),
    }
    index.add_finished([DoneFile("moved", 10, "v1", 2, "sha256", "cd")], in_manifest=True)
    assert index.finished_among([remote("moved")])["moved"][1], "a later manifest's record claims it again"


def test_finished_among_answers_for_more_files_than_one_statement_binds(index: PlanIndex) -> None:
    paths = [f"f/{i:05d}" for i in range(1234)]
    index.add_finished((DoneFile(path, 10, "v1", i) for i, path in enumerate(paths)), in_manifest=False)
    assert sorted(index.finished_among([remote(path) for path in paths])) == paths


def test_planned_files_carry_their_finished_record_and_the_totals_count_bytes_as_written(index: PlanIndex) -> None:
    index.plan([remote("a", 10), remote("b", 20), remote("made", 99, exact_size=False)])
    index.add_finished([DoneFile("a", 10, "v1", 7, "sha256", "ef"), DoneFile("made", 42, "v1", 8)], in_manifest=False)
    index.add_finished([DoneFile("not-planned", 5, "v1", 9)], in_manifest=False)
    assert [(file.path, done) for file, done in index.planned()] == [
        ("a", DoneFile("a", 10, "v1", 7, "sha256", "ef")),
        ("b", None),
        ("made", DoneFile("made", 42, "v1", 8)),
    ]
    assert index.totals() == (3, 52), "planned files, and the bytes of those finished as finished"


def test_planned_paths_match_a_glob(index: PlanIndex) -> None:
    index.plan([remote("1_Pooling/config.json"), remote("1_Pooling/x/y"), remote("2_Dense/z"), remote("top")])
    assert index.planned_paths("1_Pooling/*") == {"1_Pooling/config.json", "1_Pooling/x/y"}
    assert index.planned_paths("none/*") == set()


def test_the_fingerprint_is_the_plan_whatever_the_listing_order_and_changes_with_any_version(tmp_path: Path) -> None:
    def fingerprint(name: str, files: list[RemoteFile]) -> str:
        index = PlanIndex(tmp_path / name)
        index.plan(files)
        try:
            return index.fingerprint()
        finally:
            index.close()

    files = [remote(f"f/{i}", i) for i in range(20)]
    assert fingerprint("one", files) == fingerprint("reversed", files[::-1])
    assert fingerprint("one", files) != fingerprint("moved", [*files[:-1], files[-1]._replace(version="v2")])
    assert fingerprint("one", files) != fingerprint("fewer", files[:-1])


def test_shares_go_largest_first_to_the_least_loaded_share_lower_numbers_winning_ties(index: PlanIndex) -> None:
    index.plan([remote("a", 5), remote("b", 5), remote("c", 8), remote("d", 1), remote("e", 1)])
    index.assign_shares(2)
    split = [[file.path for batch in index.share(number) for file in batch] for number in range(2)]
    assert split == [["c", "d", "e"], ["a", "b"]]  # c: 0 (a tie); a: 1; b: 1 (5 < 8); d: 0 (8 < 10); e: 0 (9 < 10)
    assert index.shares(2) == [(3, 10), (2, 10)]
    assert index.shares(3)[2] == (0, 0), "a share with nothing planned has no files"


def test_a_share_lists_its_files_in_batches_in_path_order(index: PlanIndex) -> None:
    index.plan([remote(f"f/{i:04d}", 1) for i in range(2500)])
    index.assign_shares(1)
    batches = list(index.share(0))
    assert [len(batch) for batch in batches] == [1024, 1024, 452]
    assert [file.path for batch in batches for file in batch] == [f"f/{i:04d}" for i in range(2500)]


def test_another_shares_journal_counts_only_for_that_shares_files(index: PlanIndex) -> None:
    index.plan([remote("big", 100), remote("small", 1)])
    index.assign_shares(2)  # big -> 0, small -> 1
    index.add_finished_in(1, [DoneFile("big", 100, "v1", 1), DoneFile("small", 1, "v1", 2)])
    assert {file.path: done for file, done in index.planned()} == {"big": None, "small": DoneFile("small", 1, "v1", 2)}
