"""The job's own decisions, as pure pieces: which done files still stand (VERIFY's verdict), the pass over the plan
that skips them and returns what it counted (`still_to_fetch`), whether a manifest stands, and the outcome a run
reports. Over real files in a temporary folder and a real SQLite plan index; no source."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.destination.state import StateDir
from initializers.plan.index import PlanIndex
from initializers.plan.todo import Fetching, Listed, Verdict, still_to_fetch, verdict
from initializers.steps.outcome import Outcome, outcome, up_to_date
from initializers.store.hashers import SHA256, kinds
from initializers.transfer.progress import Fetched, Progress

BODY = b"the bytes of a file fetched earlier\n"
SHA = Checksum("sha256", hashlib.sha256(BODY).hexdigest())
OTHER = Checksum("sha256", hashlib.sha256(b"other").hexdigest())


class Log:
    """Records events as the program's logger would emit them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append(("info", event, fields))

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append(("warning", event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for _, name, fields in self.events if name == event]


def remote(path: str, checksum: Checksum | None = None, size: int = len(BODY)) -> RemoteFile:
    return RemoteFile(path, size, "v1", path, checksum)


def done_record(path: str, checksum: Checksum | None = None, size: int = len(BODY)) -> DoneFile:
    done = DoneFile(path, size, "v1", 0)
    return done._replace(algorithm=checksum.algorithm, hexdigest=checksum.hexdigest) if checksum else done


@pytest.mark.parametrize(
    ("recorded", "listed", "expected"),
    [
        (SHA, None, Verdict.INTACT),  # an S3 object whose answer vouched for a checksum the listing lacks
        (SHA, OTHER, Verdict.INTACT),  # what the file was verified against when fetched wins
        (None, SHA, Verdict.INTACT),  # a record an earlier format wrote without the listing's checksum
        (OTHER, None, Verdict.DIFFERS),
        (None, None, Verdict.UNVERIFIABLE),  # only the size was checked (SSE-KMS, multipart): nothing to re-hash
    ],
)
def test_verify_checks_a_done_file_against_the_checksum_it_was_verified_against_when_fetched(
    recorded: Checksum | None, listed: Checksum | None, expected: Verdict
):
    hashed: list[str] = []

    def digest(checksum: Checksum) -> str:
        hashed.append(checksum.algorithm)
        return hashlib.sha256(BODY).hexdigest()

    assert verdict(remote("a", listed), done_record("a", recorded), digest) is expected
    assert hashed == ([] if expected is Verdict.UNVERIFIABLE else ["sha256"])


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDir]:
    state = StateDir(str(tmp_path / "out"))
    with state.session(lambda holder, seconds: None):
        yield state


def finished_on_disk(state: StateDir, index: PlanIndex, path: str, body: bytes, checksum: Checksum | None) -> None:
    """`path` as an earlier run left it: at its final path, in the journal's record (with its mtime)."""
    final = Path(state.destination.final_path(path))
    final.parent.mkdir(parents=True, exist_ok=True)
    final.write_bytes(body)
    record = done_record(path, checksum, len(body))._replace(mtime_ns=os.stat(final).st_mtime_ns)
    index.add_finished([record], in_manifest=True)


def run_pass(
    state: StateDir, index: PlanIndex, files: list[RemoteFile], verify: bool
) -> tuple[list[RemoteFile | Fetching], Listed, Log, Progress]:
    index.plan(files)
    log, progress = Log(), Progress()
    stream = still_to_fetch(iter([files]), index, state, progress, log, kinds(SHA256) if verify else None)
    items: list[RemoteFile | Fetching] = []
    while True:
        try:
            items.append(next(stream))
        except StopIteration as end:
            return items, end.value, log, progress


def test_the_pass_skips_intact_done_files_announces_the_first_transfer_and_returns_its_counts(
    state: StateDir, tmp_path: Path
):
    index = PlanIndex(tmp_path / "index.sqlite")
    finished_on_disk(state, index, "kept.txt", BODY, SHA)
    finished_on_disk(state, index, "touched.txt", BODY, SHA)
    Path(state.destination.final_path("touched.txt")).write_bytes(
        b"changed by hand"
    )  # its size no longer matches the record
    files = [remote("kept.txt", SHA), remote("touched.txt", SHA), remote("new.txt", SHA)]
    items, listed, log, progress = run_pass(state, index, files, verify=False)
    assert items == [Fetching(already_done=1), files[1], files[2]]
    assert listed == Listed(planned=3, done=1, in_manifest=1)
    assert progress.total_files == 2 and progress.listing_done
    assert not log.named("verified"), "without VERIFY, nothing is hashed"
    index.close()


def test_with_verify_a_done_file_that_no_longer_hashes_right_is_fetched_again_and_counted(
    state: StateDir, tmp_path: Path
):
    index = PlanIndex(tmp_path / "index.sqlite")
    finished_on_disk(state, index, "good.bin", BODY, SHA)
    flipped = bytes([BODY[0] ^ 1]) + BODY[1:]  # same size, same mtime as recorded: only hashing tells
    finished_on_disk(state, index, "flipped.bin", flipped, SHA)
    finished_on_disk(state, index, "plain.bin", BODY, None)
    files = [remote("good.bin", SHA), remote("flipped.bin", SHA), remote("plain.bin")]
    items, listed, log, _ = run_pass(state, index, files, verify=True)
    assert items == [Fetching(already_done=1), files[1]]
    assert listed == Listed(planned=3, done=2, in_manifest=2)
    assert log.named("verified") == [{"files": 1, "differing": 1, "without_checksum": 1}]
    assert log.named("differs from its checksum, fetching it again") == [{"path": "flipped.bin"}]
    index.close()


def test_nothing_to_fetch_yields_nothing_not_even_the_announcement(state: StateDir, tmp_path: Path):
    index = PlanIndex(tmp_path / "index.sqlite")
    finished_on_disk(state, index, "only.txt", BODY, SHA)
    items, listed, _, _ = run_pass(state, index, [remote("only.txt", SHA)], verify=False)
    assert items == [] and listed == Listed(planned=1, done=1, in_manifest=1)
    index.close()


def test_the_pass_refuses_the_file_that_would_not_fit_before_yielding_it(state: StateDir, tmp_path: Path):
    index = PlanIndex(tmp_path / "index.sqlite")
    # Twice the free space and a GiB more: other processes on the machine free space meanwhile, never that much.
    huge = remote("huge.bin", size=2 * state.destination.free_space() + (1 << 30))
    index.plan([huge])
    stream = still_to_fetch(iter([[huge]]), index, state, Progress(), Log(), verify=None)
    assert next(stream) == Fetching(already_done=0)
    with pytest.raises(FetchError, match="not enough space in OUTPUT_PATH"):
        next(stream)
    index.close()


@pytest.mark.parametrize(
    ("fetched", "listed", "same_source", "stands"),
    [
        (0, Listed(3, 3, 3), True, True),
        (1, Listed(3, 3, 3), True, False),  # something was fetched: the manifest is rewritten
        (0, Listed(3, 3, 2), True, False),  # a file done by the journal only: the manifest must list it
        (0, Listed(3, 3, 3), False, False),  # the source moved on (another commit)
    ],
)
def test_a_manifest_stands_only_when_nothing_was_fetched_and_it_lists_every_file_of_this_source(
    fetched: int, listed: Listed, same_source: bool, stands: bool
):
    previous = {"format": manifest.FORMAT, "source": {"uri": "s3://b/p"}, "total_files": 3}
    described = {"uri": "s3://b/p" if same_source else "s3://b/other"}
    assert up_to_date(fetched, listed, 3, previous, described) is stands


def test_an_outcome_reports_totals_and_what_was_fetched_over_the_runs_duration():
    started = datetime(2026, 1, 1, tzinfo=UTC)
    result = outcome((5, 500), Fetched(2, 200, 1, 50), started, started + timedelta(seconds=1.5), "/out")
    assert result == Outcome(
        files=5, bytes=500, fetched_files=2, fetched_bytes=200, seconds=1.5, output_path="/out", dry_run=False,
        resumed_files=1, kept_bytes=50,
    )  # fmt: skip
