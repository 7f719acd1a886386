"""What a person at a terminal sees: the live view (driven under a pseudo-terminal against SeaweedFS), its text,
the structured progress events for log collectors, and the dry run's plan in a pipe and on a terminal."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import re
import tracemalloc
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from devkit import screen as terminal_screen
from devkit.programs import run_on_terminal, run_program
from devkit.relay import Relay, StatusFault
from devkit.screen import screen
from devkit.seaweed import SECRET_KEY, SeaweedFS
from initializers.common import human, terminal
from initializers.common.logs import get_logger
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.config.contract import Config
from initializers.plan import dryrun
from initializers.plan.selection import Selected, Selection
from initializers.sources import MODEL
from initializers.transfer import live_view
from initializers.transfer.progress import InFlight, ProgressEvents, Snapshot

MIB = 1 << 20
MB, GB = 10**6, 10**9
#: Escape sequences (colours, cursor moves, erasing) and the carriage returns between redraws.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
#: The sequences that colour or style text (SGR): not the cursor moves of a redrawn block.
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
#: A console log line as it starts on a terminal.
_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z \[\w+ *\] (\w+)")


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
    [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1024, "1.0 kB"), (int(1.5 * MB), "1.5 MB"),
     (300 * MB, "300.0 MB"), (999_949, "999.9 kB"), (999_950, "1.0 MB"), (5 * GB, "5.0 GB"), (3 * 10**12, "3.0 TB")],
)  # fmt: skip
def test_sizes_read_in_decimal_units_as_the_logs_mb_s(count: int, text: str):
    """The unit family of the `done` line's `mb_s` and the progress events' `rate_mb_s`: one terminal, one unit. A
    number that would round to 1000 goes up a unit: a size is at most 8 characters (`999.9 kB`)."""
    assert human.size(count) == text
    assert human.rate(count) == f"{text}/s"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (8.4, "8s"), (125, "2m05s"), (3 * 3600 + 7 * 60 + 5, "3h07m")]
)
def test_durations_read_in_their_two_largest_units(seconds: float, text: str):
    assert human.duration(seconds) == text


def test_counts_take_an_s_unless_there_is_one():
    assert [human.count(n, "file") for n in (0, 1, 2, 1234)] == ["0 files", "1 file", "2 files", "1,234 files"]


def test_while_the_listing_goes_on_the_view_counts_what_it_listed_and_gives_no_percentage():
    listing = snapshot(files_done=1, files=11888, bytes_done=4 * MB, bytes=700 * MB, files_present=3)
    assert listing.percent is None and listing.eta is None
    assert live_view.head(listing, 100) == (
        0,
        "listing... 11,891 files so far (3 already here)  700.0 MB to fetch  4.0 MB fetched  2.0 MB/s",
    )
    assert (
        live_view.status(listing, 80) == "listing... 11,891 files so far  700.0 MB to fetch  4.0 MB fetched  2.0 MB/s"
    )
    assert live_view.status(snapshot(), 80) == "listing... 0 files so far  0 B to fetch  0 B fetched  0 B/s"


def test_once_listed_the_view_gives_a_bar_and_percent_sizes_rate_eta_and_files():
    listed = snapshot(files_done=3, files=12, bytes_done=130 * MB, bytes=300 * MB, listing_done=True, seconds=6.5)
    text = " 43.3%  130.0 MB / 300.0 MB  20.0 MB/s  ETA 8s  files 3/12"
    assert live_view.head(listed, 100) == (live_view.BAR_WIDTH, text)
    assert live_view.head(listed, 80) == (80 - live_view.GAP - len(text), text)  # the bar shrinks for the text


#: A long run's numbers at their widest: 999.9 GB, 123,456/1,234,567 files, an ETA in hours.
LARGE = snapshot(files_done=123456, files=1234567, bytes_done=int(123.4 * GB), bytes=int(999.9 * GB),
                 listing_done=True, seconds=10 * 3600)  # fmt: skip


@pytest.mark.parametrize(
    ("shot", "width", "bar", "text"),
    [
        (LARGE, 80, 0, " 12.3%  123.4 GB / 999.9 GB  3.4 MB/s  ETA 71h01m  files 123,456/1,234,567"),
        (LARGE, 60, 15, " 12.3%  ETA 71h01m  files 123,456/1,234,567"),  # the rate, then the sizes go
        (LARGE, 40, 0, " 12.3%  files 123,456/1,234,567"),  # then the ETA
        (LARGE, 30, 22, " 12.3%"),  # then the files; the bar comes back in the room left
        (snapshot(files_done=2, files=4, bytes_done=6_200_000, bytes=10_500_000, listing_done=True, seconds=3.1),
         70, 15, " 59.0%  6.2 MB / 10.5 MB  2.0 MB/s  ETA 2s  files 2/4"),  # the bar shrinks before any text goes
        (snapshot(files=123456, files_present=1234567, bytes=int(999.9 * GB), seconds=2.0), 40, 0,
         "listing... 1,358,023 files so far"),
        (snapshot(files=123456, bytes=int(999.9 * GB), seconds=2.0), 20, 0, "listing..."),
    ],
)  # fmt: skip
def test_the_first_line_fits_its_terminal_dropping_the_least_needed_parts_whole(
    shot: Snapshot, width: int, bar: int, text: str
):
    """The bar shrinks, then goes; then the rate, the sizes, the ETA and the files, in that order: never a number
    cut in its middle."""
    assert live_view.head(shot, width) == (bar, text)
    assert not bar or bar + live_view.GAP + len(text) <= width


@pytest.mark.parametrize(
    ("width", "files_count", "line"),
    [
        (80, True, "  very/long/folder/very/long/folder/very/long/folder/very…  1.0 GB / 5.0 GB  20%"),
        (60, True, "  very/long/folder/very/long/folder/v…  1.0 GB / 5.0 GB  20%"),
        (40, True, "  very/long/folde…  1.0 GB / 5.0 GB  20%"),
        (28, False, "  ver…  1.0 GB / 5.0 GB  20%"),  # the path at its shortest, 4 columns
        (27, False, "  1.0 GB / 5.0 GB  20%"),  # then it goes, before any figure does
        (22, False, "  1.0 GB / 5.0 GB  20%"),
        (21, False, "  very/long/fo…   20%"),  # then the sizes go, and the path comes back in the room left
        (16, False, "  very/lo…   20%"),
        (5, False, "20%"),  # the percent stays whole while it fits at all
    ],
)
def test_rich_draws_each_line_within_its_terminal_and_a_files_progress_whole(width: int, files_count: bool, line: str):
    """What rich draws, not only the text given to it: the first line within the terminal, the files count whole
    while there is room for it; a file's line keeps its progress whole, the path cut, then gone, before the sizes
    go (the percent stays)."""
    files = (InFlight("very/long/folder/" * 6 + "model-00001-of-00002.safetensors", 5 * GB, GB),)
    for shot in (
        LARGE,
        snapshot(files_done=2, files=4, bytes_done=6_200_000, bytes=10_500_000, listing_done=True, seconds=3.1),
    ):
        console = Console(width=width, file=io.StringIO(), force_terminal=True)
        console.print(live_view.frame(dataclasses.replace(shot, in_flight=files), width))
        first, path = plain(console.file.getvalue()).splitlines()
        assert len(first) <= width and (f"files {shot.files_done:,}/{shot.files:,}" in first or not files_count), first
        assert path == line, path


def drawn(shot: Snapshot, width: int) -> list[str]:
    """The lines of the view's frame for `shot` in `width` columns, as rich draws them without colour."""
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None)
    console.print(live_view.frame(shot, width))
    return [line.rstrip() for line in plain(console.file.getvalue()).splitlines()]


def test_a_terminal_rewraps_its_lines_when_it_shrinks_as_tmux_does():
    """The test terminal below: a line drawn 100 columns wide takes three rows at 40, the cursor on the last; a
    block that then moves up by the lines it drew (as rich's own live block does) leaves rows of them on screen."""
    shown = terminal_screen.Terminal(100).feed("a" * 100 + "\n" + "b" * 10)
    shown.resize(40)
    assert shown.rows() == ["a" * 40, "a" * 40, "a" * 20, "b" * 10]
    assert shown.feed("\r\x1b[2K\x1b[1A\x1b[2Kc").rows() == ["a" * 40, "a" * 40, "c"]


def test_a_terminal_that_shrinks_between_frames_shows_the_new_frame_alone():
    """A terminal that rewraps its lines (tmux, VTE, iTerm2, kitty) as it goes from 100 columns to 60, 40 and 16:
    each redraw leaves the new frame under the log lines and nothing of the last one; the summary alone at the end."""
    shown = terminal_screen.Terminal(100)
    console = Console(file=shown, width=100, force_terminal=True, color_system=None)
    view = live_view.LiveView(console)
    files = (InFlight("very/long/folder/" * 3 + "model-00001-of-00002.safetensors", 5 * GB, GB),
             InFlight("tokenizer.json", 3 * MB, MB))  # fmt: skip
    shots = [snapshot(files_done=1, files=4, bytes_done=n * GB, bytes=10 * GB, listing_done=True, seconds=2.0 * n,
                      in_flight=files) for n in range(1, 5)]  # fmt: skip
    console.print("a log line")
    view.report(shots[0])
    assert shown.rows() == ["a log line", *drawn(shots[0], 100)]
    for shot, width in zip(shots[1:], (60, 40, 16), strict=True):
        shown.resize(width)
        console.width = width
        view.report(shot)
        assert shown.rows() == ["a log line", *drawn(shot, width)], width
    view.close(shots[-1], failed=False)
    logged, *summary = shown.rows()
    assert logged == "a log line" and " ".join(summary) == "fetched 1 file, 4.0 GB in 8s (500.0 MB/s average)", summary


def test_a_file_named_with_control_characters_is_shown_not_obeyed(monkeypatch: pytest.MonkeyPatch):
    """An S3 key may hold ESC: a terminal given it raw would obey the sequence (here, retitle its window). The live
    view and the dry run's table write each control character as its escape instead."""
    evil = "weights\x1b]0;pwned\x07\x9b.bin"
    assert terminal.printable(evil) == "weights\\x1b]0;pwned\\x07\\x9b.bin"
    console = Console(width=120, file=io.StringIO(), force_terminal=True)
    console.print(live_view.frame(snapshot(in_flight=(InFlight(evil, 10 * MB, MB),)), 120))
    monkeypatch.setenv("COLUMNS", "120")
    out = Terminal()

    def planned() -> Generator[list[RemoteFile], None, Selected]:
        yield [RemoteFile(evil, 5, "v", "k")]
        return Selected(1, {}, ())

    dryrun.print_plan(planned(), out)
    for shown in (console.file.getvalue(), out.getvalue()):
        assert "\x1b]0" not in shown and "\x07" not in shown and "\x9b" not in shown, repr(shown)
        assert "weights\\x1b]0;pwned\\x07\\x9b.bin" in shown


def test_the_view_shows_the_largest_files_in_flight_first_and_how_far_each_got():
    """Lines no wider than their text needs: the paths' column as wide as the longest, the progress right-aligned."""
    files = (*(InFlight(f"shard-{i}.bin", (10 - i) * MB, MB) for i in range(7)), InFlight("empty", 0, 0))
    lines = live_view.file_lines(snapshot(in_flight=files), 100)
    assert lines[:2] == ["  shard-0.bin  1.0 MB / 10.0 MB  10%", "  shard-1.bin   1.0 MB / 9.0 MB  11%"]
    assert len(lines) == live_view.FILES_SHOWN
    assert live_view.file_lines(snapshot(in_flight=files[-1:]), 100) == ["  empty  0 B"]
    wide = (InFlight("数据/模型-00001.safetensors", 5 * GB, GB), InFlight("a.bin", 3 * MB, MB))  # 2 columns a character
    assert live_view.file_lines(snapshot(in_flight=wide), 16) == ["  数据/模…   20%", "  a.bin      33%"]


def test_the_summary_gives_files_size_time_and_average_rate():
    done = snapshot(files_done=2, files=2, bytes_done=3 * MB, bytes=3 * MB, listing_done=True, seconds=3.0)
    assert live_view.summary(done, failed=False) == "fetched 2 files, 3.0 MB in 3s (1.0 MB/s average)"
    assert live_view.summary(done, failed=True) == "stopped: 2 of 2 files fetched, 3.0 MB in 3s (1.0 MB/s average)"
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


class Terminal(io.StringIO):
    """Output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("env", "colours", "redraws"),
    [
        ({}, True, True),
        ({"NO_COLOR": ""}, True, True),
        ({"NO_COLOR": "0"}, False, True),
        ({"TERM": "dumb"}, False, False),
    ],
)
def test_colour_needs_a_terminal_and_no_no_color_redrawing_a_terminal_not_dumb(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], colours: bool, redraws: bool
):
    """NO_COLOR set to anything but the empty text takes the colour off (https://no-color.org), not the redrawing."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (terminal.colours(Terminal()), terminal.redraws(Terminal())) == (colours, redraws)
    assert not terminal.colours(io.StringIO()) and not terminal.redraws(io.StringIO())


def test_a_dry_run_on_a_terminal_is_a_table_of_human_sizes_with_a_total(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "80")
    selection = Selection(Config(), MODEL, get_logger("test"))
    listing = [RemoteFile("model.safetensors", 1234567, "v", "k"), RemoteFile("[b]/config.json", 700, "v", "k"),
               RemoteFile("tf_model.h5", 99, "v", "k"), RemoteFile("tokenizer.json", 3 * MB, "v", "k")]  # fmt: skip

    def planned() -> Generator[list[RemoteFile], None, Selected]:  # two batches, then the selection's findings
        selected = KeepsReturnValue(selection.filter(listing))
        files = iter(selected)
        yield list(itertools.islice(files, 2))
        yield list(files)
        return selected.value

    out = Terminal()
    assert dryrun.print_plan(planned(), out) == (3, 1234567 + 700 + 3 * MB)
    lines = [line.rstrip() for line in plain(out.getvalue()).splitlines()]
    assert lines == [
        "    size  path",
        "  1.2 MB  model.safetensors",
        "   700 B  [b]/config.json",  # a path is text, never markup
        "  3.0 MB  tokenizer.json",
        "─" * 80,
        "  4.2 MB  in 3 files to fetch (1 file, 99 B skipped by the selection)",
    ]


def test_a_dry_runs_table_waits_for_the_plan_on_disk_not_in_memory(monkeypatch: pytest.MonkeyPatch):
    """Its rows are printed once the plan is complete: meanwhile they wait in a temporary file, and what the process
    holds stays under the spool's bound (20,000 rows are twice as much). Then every row, in the listing's order; a
    path wider than the terminal is folded under itself, never cut."""
    monkeypatch.setenv("COLUMNS", "80")
    grown: list[int] = []
    out = Terminal()

    def planned() -> Generator[list[RemoteFile], None, Selected]:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, 20000, 500):
            yield [RemoteFile(f"part-{i:05d}/{'x' * 90}.parquet", i, "v", "k") for i in range(start, start + 500)]
            assert not out.getvalue()  # nothing printed while the plan is made
        grown.append(tracemalloc.get_traced_memory()[0] - before)
        tracemalloc.stop()
        yield [RemoteFile("long/" + "y" * 100, 5, "v", "k")]
        return Selected(20001, {}, ())

    assert dryrun.print_plan(planned(), out) == (20001, sum(range(20000)) + 5)
    assert grown[0] < dryrun._SPOOL_BYTES + (256 << 10), grown
    lines = plain(out.getvalue()).splitlines()
    assert len(lines) == 1 + 2 * 20001 + 2  # the header, each row on two lines, the rule and the total
    folded = " " * 10 + "x" * 31 + ".parquet"
    assert lines[1:3] == ["     0 B  part-00000/" + "x" * 59, folded]
    assert lines[-6:-2] == [
        " 20.0 kB  part-19999/" + "x" * 59,
        folded,
        "     5 B  long/" + "y" * 65,
        " " * 10 + "y" * 35,
    ]


# Real runs.


def test_a_run_on_a_terminal_shows_the_live_view_and_leaves_a_summary(seaweed: SeaweedFS, s3: Any, bucket: str,
                                                                     tmp_path: Path):  # fmt: skip
    """The listing is held up (two SlowDowns, each asking for a second's wait) so the view shows it, then 3 MiB come
    at 1 MiB/s: updates while they arrive, in colour. A file whose name holds the secret key is shown hidden."""
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
    assert "listing... 0 files so far  0 B to fetch" in text
    assert re.search(r"━ *\d+\.\d%  \d+\.\d (kB|MB) / 3\.1 MB  [\d.]+ (kB|MB)/s  ETA \d+s  files \d/2", text), text
    assert re.search(r"big\.bin +\d+\.\d (kB|MB) / 2\.1 MB +\d+%", text), text
    assert re.search(r"fetched 2 files, 3\.1 MB in \d+s \([\d.]+ (kB|MB)/s average\)", text), text
    assert _COLOURS.search(result.stdout)  # the logs' and the bar's
    assert "rate_mb_s" not in text  # the view replaces the structured events on a terminal
    assert SECRET_KEY not in result.stdout and "***.bin" in text
    # What stays on the terminal: the log lines whole (those printed while the block showed went above it), the
    # summary, and nothing of the block.
    left = screen(result.stdout)
    logged = [found[1] for line in left if (found := _LOG_LINE.match(line))]
    assert logged == ["listing", "waiting", "waiting", "fetching", "listed", "done"], left
    assert not [line for line in left if "[info" in line and not re.match(r"\d{4}-", line)], left
    assert not [line for line in left if "ETA" in line or "listing..." in line or "━" in line], left
    assert len([line for line in left if re.fullmatch(r"fetched 2 files, 3\.1 MB in \d+s \(.* average\)", line)]) == 1
    assert (tmp_path / "out" / "big.bin").stat().st_size == 2 * MIB
    again = run_on_terminal("dataset", {**env, "ENDPOINT": seaweed.endpoint})
    assert again.code == 0 and "nothing to fetch: 2 files already here" in plain(again.stdout), plain(again.stdout)


def test_a_run_in_a_pipe_logs_on_stderr_alone(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    """As rclone, s5cmd and `hf` do: `2>file` takes the logs, and stdout (for data) stays empty."""
    s3.put_object(Bucket=bucket, Key="d/a.bin", Body=b"x" * 10)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(tmp_path / "out")}
    result = run_program("dataset", env)
    assert result.code == 0 and result.stdout == "", result.stdout + result.stderr
    logged = [json.loads(line)["event"] for line in result.stderr.splitlines()]
    assert logged[0] == "listing" and logged[-1] == "done", logged


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


def model_in(s3: Any, bucket: str) -> None:
    """A model whose default selection skips a file: the PyTorch copy beside the safetensors weights."""
    for key, body in (("m/model.safetensors", b"w" * 3000), ("m/pytorch_model.bin", b"p" * 3000),
                      ("m/config.json", b"{}")):  # fmt: skip
        s3.put_object(Bucket=bucket, Key=key, Body=body)


def test_a_dry_run_on_a_terminal_prints_its_table_whole_after_the_logs_of_the_listing(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """The selection logs `skipped` once the listing has ended: before the table, which is printed once the plan is
    complete, never between its header and its total."""
    model_in(s3, bucket)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m", "OUTPUT_PATH": str(tmp_path / "out"), "DRY_RUN": "true"}
    result = run_on_terminal("model", env, columns=100)
    lines = screen(result.stdout)
    assert result.code == 0, lines
    header = next(i for i, line in enumerate(lines) if re.fullmatch(" +size  path", line))
    total = next(i for i, line in enumerate(lines) if "to fetch (1 file, 3.0 kB skipped by the" in line)
    logged = [(i, found[1]) for i, line in enumerate(lines) if (found := _LOG_LINE.match(line))]
    assert not [event for i, event in logged if header < i <= total], lines
    assert [event for i, event in logged if i < header] == ["listing", "skipped"], lines
    assert [event for i, event in logged if i > total] == ["dry"], lines  # "dry run done"
    assert lines[header + 1 : total] == ["     2 B  config.json", "  3.0 kB  model.safetensors", "─" * 100], lines


@pytest.mark.parametrize(
    ("variables", "colours", "view"),
    [({}, True, True), ({"NO_COLOR": "1"}, False, True), ({"TERM": "dumb"}, False, False)],
    ids=["colour", "NO_COLOR", "TERM=dumb"],
)
def test_no_color_takes_the_colour_off_and_a_dumb_terminal_the_live_view_too(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, variables: dict[str, str], colours: bool, view: bool
):
    """The logs, the dry run's table and the live view: colour codes on a terminal, none with NO_COLOR (the view
    still redraws, with cursor moves) and none with TERM=dumb, which has no view and so no escape at all."""
    model_in(s3, bucket)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m", "OUTPUT_PATH": str(tmp_path / "out"), **variables}
    dry = run_on_terminal("model", {**env, "DRY_RUN": "true"})
    fetched = run_on_terminal("model", env)
    assert dry.code == 0 and fetched.code == 0, plain(dry.stdout + fetched.stdout)
    assert "to fetch (1 file, 3.0 kB skipped by the selection)" in plain(dry.stdout), plain(dry.stdout)
    for result in (dry, fetched):
        assert bool(_COLOURS.search(result.stdout)) == colours, repr(result.stdout)
    assert bool(re.search(r"fetched 2 files, 3\.0 kB in \d+s", fetched.stdout)) == view, repr(fetched.stdout)
    if not view:
        assert "\x1b[" not in dry.stdout + fetched.stdout, repr(dry.stdout + fetched.stdout)
