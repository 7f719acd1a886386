"""What a person at a terminal sees, and what a log collector gets: the structured progress events, the dry run's
plan in a pipe and on a terminal."""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from devkit.programs import run_program
from devkit.seaweed import SeaweedFS
from initializers.common import human
from initializers.common.logs import get_logger
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import Returning
from initializers.config.contract import MODEL, Config
from initializers.plan import dryrun
from initializers.plan.selection import Selected, Selection
from initializers.transfer.progress import ProgressEvents, Snapshot

MIB = 1 << 20
#: Escape sequences (colours, cursor moves, erasing) and the carriage returns between redraws.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def plain(output: str) -> str:
    return _ESCAPES.sub("", output)


class Events:
    """A log that keeps each event's fields."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.seen.append({"event": event, **fields})


def snapshot(**fields: Any) -> Snapshot:
    defaults: dict[str, Any] = {"files_done": 0, "files": 0, "bytes_done": 0, "bytes": 0, "listing_done": False,
                                "seconds": 2.0}  # fmt: skip
    return Snapshot(**{**defaults, **fields})


def test_progress_events_while_listing_carry_no_percentage_nor_eta():
    """Against a refused connection the listing never ends: no `0/0, 100.0%`; nor 85% of what is listed so far."""
    log = Events()
    events = ProgressEvents(log, 5.0)
    events.report(snapshot())  # nothing listed yet: a refused connection being retried
    events.report(snapshot(files_done=2, files=11891, bytes_done=MIB, bytes=2 * MIB))
    events.report(snapshot(files_done=2, files=3, bytes_done=MIB, bytes=4 * MIB, listing_done=True))
    refused, partial, listed = log.seen
    assert refused == {"event": "progress", "files_done": 0, "listed_so_far": 0, "bytes": 0, "rate_mb_s": 0.0,
                       "listing": "in progress"}  # fmt: skip
    assert partial["listed_so_far"] == 11891 and not {"percent", "eta_s", "files", "total_bytes"} & set(partial)
    assert listed["files"] == "2/3" and listed["percent"] == 25.0 and listed["eta_s"] == 6.0


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (int(1.5 * MIB), "1.5 MiB"), (300 * MIB, "300.0 MiB"),
     (5 << 30, "5.0 GiB"), (3 << 40, "3.0 TiB")],
)  # fmt: skip
def test_sizes_read_in_binary_units(count: int, text: str):
    assert human.size(count) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (8.4, "8s"), (125, "2m05s"), (3 * 3600 + 7 * 60 + 5, "3h07m")]
)
def test_durations_read_in_their_two_largest_units(seconds: float, text: str):
    assert human.duration(seconds) == text


def test_a_dry_run_on_a_terminal_is_a_table_of_human_sizes_with_a_total(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "80")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    selection = Selection(Config(), MODEL, get_logger("test"))
    listing = [RemoteFile("model.safetensors", 1234567, "v", "k"), RemoteFile("[b]/config.json", 700, "v", "k"),
               RemoteFile("tf_model.h5", 99, "v", "k"), RemoteFile("tokenizer.json", 3 * MIB, "v", "k")]  # fmt: skip

    def planned() -> Generator[list[RemoteFile], None, Selected]:  # two batches, then the selection's findings
        selected = Returning(selection.filter(listing))
        files = iter(selected)
        yield list(itertools.islice(files, 2))
        yield list(files)
        return selected.value

    out = Terminal()
    assert dryrun.print_plan(planned(), out) == (3, 1234567 + 700 + 3 * MIB)
    lines = [line.rstrip() for line in plain(out.getvalue()).splitlines()]
    assert lines == [
        "      size  path",
        "   1.2 MiB  model.safetensors",
        "     700 B  [b]/config.json",  # a path is text, never markup
        "   3.0 MiB  tokenizer.json",
        "─" * 80,
        "   4.2 MiB  in 3 files to fetch (1 files, 99 B skipped by the patterns)",
    ]


def test_a_dry_run_in_a_pipe_prints_only_the_plan_on_stdout(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    s3.put_object(Bucket=bucket, Key="d/a.bin", Body=b"x" * 10)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(tmp_path / "out"), "DRY_RUN": "1"}
    result = run_program("dataset", env)
    assert result.code == 0, result.stdout + result.stderr
    plan = [json.loads(line) for line in result.stdout.splitlines()]
    assert plan == [{"path": "a.bin", "size": 10},
                    {"total_files": 1, "total_bytes": 10, "skipped_files": 0, "skipped_bytes": 0}]  # fmt: skip
    logged = [json.loads(line)["event"] for line in result.stderr.splitlines()]
    assert logged[0] == "listing" and logged[-1] == "dry run done"
