"""What a person at a terminal sees: the live view (driven under a pseudo-terminal against SeaweedFS), its text,
the structured progress events for log collectors, and the dry run's plan in a pipe and on a terminal."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from devkit.programs import run_on_terminal, run_program
from devkit.relay import Relay, StatusFault
from devkit.screen import screen
from devkit.seaweed import SECRET_KEY, SeaweedFS
from initializers.common import human
from initializers.common.logs import get_logger
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import Returning
from initializers.config.contract import MODEL, Config
from initializers.plan import dryrun
from initializers.plan.selection import Selected, Selection
from initializers.transfer import live_view
from initializers.transfer.progress import InFlight, ProgressEvents, Snapshot

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


# The pure parts.


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


def test_counts_take_an_s_unless_there_is_one():
    assert [human.count(n, "file") for n in (0, 1, 2, 1234)] == ["0 files", "1 file", "2 files", "1,234 files"]


def test_while_the_listing_goes_on_the_view_counts_what_it_listed_and_gives_no_percentage():
    listing = snapshot(files_done=1, files=11888, bytes_done=4 * MIB, bytes=700 * MIB, files_present=3)
    assert listing.percent is None and listing.eta is None
    assert live_view.status(listing) == (
        "listing... 11,891 files so far (3 already here); 700.0 MiB to fetch, 4.0 MiB fetched at 2.0 MiB/s"
    )
    assert live_view.status(snapshot()).startswith("listing... 0 files so far; 0 B to fetch")


def test_once_listed_the_view_gives_percent_sizes_rate_eta_and_files():
    listed = snapshot(files_done=3, files=12, bytes_done=130 * MIB, bytes=300 * MIB, listing_done=True, seconds=6.5)
    assert live_view.status(listed) == " 43.3%  130.0 MiB / 300.0 MiB  20.0 MiB/s  ETA 8s  files 3/12"


def test_the_view_shows_the_largest_files_in_flight_first_and_how_far_each_got():
    files = tuple(InFlight(f"shard-{i}.bin", (10 - i) * MIB, MIB) for i in range(7))
    lines = live_view.file_lines(snapshot(in_flight=files))
    assert lines[:2] == [("shard-0.bin", "1.0 MiB / 10.0 MiB  10%"), ("shard-1.bin", "1.0 MiB / 9.0 MiB  11%")]
    assert len(lines) == live_view.FILES_SHOWN


def test_the_summary_gives_files_size_time_and_average_rate():
    done = snapshot(files_done=2, files=2, bytes_done=3 * MIB, bytes=3 * MIB, listing_done=True, seconds=3.0)
    assert live_view.summary(done, failed=False) == "fetched 2 files, 3.0 MiB in 3s (1.0 MiB/s average)"
    assert live_view.summary(done, failed=True) == "stopped: 2 of 2 files fetched, 3.0 MiB in 3s (1.0 MiB/s average)"
    refused = snapshot(seconds=7.0)  # the listing never answered
    assert (
        live_view.summary(refused, failed=True)
        == "stopped while listing (0 files so far): 0 fetched, 0 B in 7s (0 B/s average)"
    )
    up_to_date = snapshot(listing_done=True, files_present=1)
    assert live_view.summary(up_to_date, failed=False) == "nothing to fetch: 1 file already here"


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
        "   4.2 MiB  in 3 files to fetch (1 file, 99 B skipped by the patterns)",
    ]


# Real runs.


def test_a_run_on_a_terminal_shows_the_live_view_and_leaves_a_summary(seaweed: SeaweedFS, s3: Any, bucket: str,
                                                                     tmp_path: Path):  # fmt: skip
    """The listing is held up (two SlowDowns, each asking for a second's wait) so the view shows it, then 3 MiB come
    at 1 MiB/s: updates while they arrive. A file whose name holds the secret key is shown hidden."""
    secret_named = f"d/{SECRET_KEY}.bin"
    for key, size in (("d/big.bin", 2 * MIB), (secret_named, MIB)):
        s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(size))
    with Relay(seaweed.endpoint) as relay:
        relay.add_fault(StatusFault(status=503, match="list-type", times=2, headers={"Retry-After": "1"}))
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/d",
               "OUTPUT_PATH": str(tmp_path / "out"), "MAX_BANDWIDTH": "1M"}  # fmt: skip
        result = run_on_terminal("dataset", env, columns=100, lines=30)
    text = plain(result.stdout)
    assert result.code == 0, text
    assert "listing... 0 files so far; 0 B to fetch" in text
    assert re.search(r"\d+\.\d%  \d+\.\d MiB / 3\.0 MiB  [\d.]+ (KiB|MiB)/s  ETA \d+s  files \d/2", text), text
    assert re.search(r"big\.bin +\d+\.\d (KiB|MiB) / 2\.0 MiB +\d+%", text), text
    assert re.search(r"fetched 2 files, 3\.0 MiB in \d+s \([\d.]+ (KiB|MiB)/s average\)", text), text
    assert "rate_mb_s" not in text  # the view replaces the structured events on a terminal
    assert SECRET_KEY not in result.stdout and "***.bin" in text
    # What stays on the terminal: the log lines whole (those printed while the block showed went above it), the
    # summary, and nothing of the block.
    left = screen(result.stdout)
    logged = [found[1] for line in left if (found := re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z \[\w+ *\] (\w+)", line))]
    assert logged == ["listing", "waiting", "waiting", "fetching", "listed", "done"], left
    assert not [line for line in left if "[info" in line and not re.match(r"\d{4}-", line)], left
    assert not [line for line in left if "ETA" in line or "listing..." in line or "━" in line], left
    assert len([line for line in left if re.fullmatch(r"fetched 2 files, 3\.0 MiB in \d+s \(.* average\)", line)]) == 1
    assert (tmp_path / "out" / "big.bin").stat().st_size == 2 * MIB
    again = run_on_terminal("dataset", {**env, "ENDPOINT": seaweed.endpoint})
    assert again.code == 0 and "nothing to fetch: 2 files already here" in plain(again.stdout), plain(again.stdout)


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


def test_json_logs_asked_for_on_a_terminal_turn_the_view_off(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    s3.put_object(Bucket=bucket, Key="d/a.bin", Body=b"x" * 10)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(tmp_path / "out"),
           "LOG_FORMAT": "json"}  # fmt: skip
    result = run_on_terminal("dataset", env)
    assert result.code == 0, result.stdout
    assert [json.loads(line)["event"] for line in result.stdout.splitlines()][-1] == "done"  # JSON lines only
