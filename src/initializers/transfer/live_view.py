"""The live view on a terminal: one block redrawn in place (`status`, `file_lines`), then a summary line that stays.

Only a run whose stderr is a terminal shows it (`reporters`), and rich is imported only then. Its text goes through
the logs' redaction (a path or a URI may carry a secret); log lines printed meanwhile go above the block.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from initializers.common import human, terminal
from initializers.common.logs import redact
from initializers.transfer.progress import InFlight, ProgressEvents, Reporter, Snapshot

#: Seconds between `progress` events unless PROGRESS_INTERVAL says otherwise.
PROGRESS_INTERVAL_SECONDS = 5.0

#: Seconds between redraws; the first comes at once, so the view is up within a second of the run's start.
REDRAW_SECONDS = 0.25
#: Columns of the bar before the first line's text, once the total is known and the terminal has room for both: in a
#: narrower one the bar shrinks to `MIN_BAR_WIDTH`, then goes, before any part of the text does.
BAR_WIDTH = 24
MIN_BAR_WIDTH = 8
#: Columns between the bar and the text, and between the text's parts.
GAP = 2
#: The largest files in flight shown, one line each.
FILES_SHOWN = 5
#: Columns before a file's path.
INDENT = 2
#: The fewest columns a file's path is shown in, cut with an ellipsis; with fewer, its line shows the progress alone.
MIN_PATH_WIDTH = 4


def reporters(log_format: str | None, interval: float | None, log: Any) -> list[Reporter]:
    """The live view when stderr is a terminal that can redraw and LOG_FORMAT is not json (which keeps a terminal run
    as a log collector sees it), else `progress` events every `interval` seconds (None: `PROGRESS_INTERVAL_SECONDS`).
    Never both: the logs go to that terminal too, where the view says it all."""
    if log_format != "json" and terminal.redraws(sys.stderr):
        return [LiveView()]
    return [ProgressEvents(log, interval or PROGRESS_INTERVAL_SECONDS)]


class Part(NamedTuple):
    """A part of the first line: its text, how long it stays as columns run short (higher: longer), its separator."""

    text: str
    keep: int
    before: str = " " * GAP


def fit(parts: list[Part], width: int) -> str:
    """The parts in their order, the least kept ones left out until the line fits `width` columns: a part goes
    whole or stays whole, never cut mid-number. The most kept one stays even when alone it does not fit."""
    shown = list(parts)
    while len(shown) > 1 and len(_joined(shown)) > width:
        shown.remove(min(shown, key=lambda part: part.keep))
    return _joined(shown)


def _joined(parts: list[Part]) -> str:
    return "".join(part.before + part.text if index else part.text for index, part in enumerate(parts))


def head(snapshot: Snapshot, width: int) -> tuple[int, str]:
    """The first line in `width` columns: the bar's width (0: still listing, or no room) and the text (`status`)."""
    text = status(snapshot, width)
    room = width - len(text) - GAP
    return (min(BAR_WIDTH, room) if snapshot.listing_done and room >= MIN_BAR_WIDTH else 0), text


def status(snapshot: Snapshot, width: int) -> str:
    """The first line's text: the listing's state while it goes on, then percent, sizes, rate, ETA and files; as
    columns run short, parts go by their `keep`, the least first (the percent, or "listing...", stays)."""
    if not snapshot.listing_done:
        listed = f"{human.count(snapshot.files + snapshot.files_present, 'file')} so far"
        parts = [
            Part("listing...", 6),
            Part(listed, 5, " "),
            *([Part(f"({snapshot.files_present:,} already here)", 1, " ")] if snapshot.files_present else []),
            Part(f"{human.size(snapshot.bytes)} to fetch", 4),
            Part(f"{human.size(snapshot.bytes_done)} fetched", 3),
            Part(human.rate(snapshot.rate), 2),
        ]
        return fit(parts, width)
    percent, eta = snapshot.percent, snapshot.eta
    parts = [
        Part(f"{percent:5.1f}%", 5),
        Part(f"{human.size(snapshot.bytes_done)} / {human.size(snapshot.bytes)}", 2),
        Part(human.rate(snapshot.rate), 1),
        Part(f"ETA {'-' if eta is None else human.duration(eta)}", 3),
        Part(f"files {snapshot.files_done:,}/{snapshot.files:,}", 4),
    ]
    return fit(parts, width)


def progress(file: InFlight) -> list[Part]:
    """How far a file in flight got: the sizes, then the percent, which stays the longer."""
    if not file.size:
        return [Part(human.size(0), 2)]
    return [Part(f"{human.size(file.landed)} / {human.size(file.size)}", 1),
            Part(f"{100 * file.landed // file.size:3d}%", 2, " ")]  # fmt: skip


def file_lines(snapshot: Snapshot, width: int) -> list[str]:
    """The largest files in flight in `width` columns, a line each: the path, then how far the file got, in a column.
    The progress stays whole: as columns run short, the path is cut (with an ellipsis), then goes; only then do the
    sizes go, the percent staying. Lines are no wider than their text needs: a terminal shrunk later rewraps less."""
    from rich.cells import cell_len, set_cell_size

    files = snapshot.in_flight[:FILES_SHOWN]
    room = width - INDENT
    done = [_joined(progress(file)) for file in files]
    if max(map(len, done), default=0) > room:  # not even alone: each keeps its percent
        done = [fit(progress(file), 0) for file in files]
    column = max(map(len, done), default=0)
    paths = [terminal.printable(redact(file.path)) for file in files]
    path_width = min(max(map(cell_len, paths), default=0), room - column - GAP)
    if path_width < MIN_PATH_WIDTH:  # the indent too goes before a figure is cut
        lines = [" " * INDENT + text.rjust(column) for text in done]
        return [line if len(line) <= width else line.lstrip() for line in lines]
    return [
        " " * INDENT
        + (
            set_cell_size(path, path_width)
            if cell_len(path) <= path_width
            else set_cell_size(path, path_width - 1) + "…"
        )
        + " " * GAP
        + text.rjust(column)
        for path, text in zip(paths, done, strict=True)
    ]


def summary(snapshot: Snapshot, failed: bool) -> str:
    """The line left on screen once the block goes: files, size, time and average rate."""
    fetched = (
        f"{human.size(snapshot.bytes_done)} in {human.duration(snapshot.seconds)} ({human.rate(snapshot.rate)} average)"
    )
    if failed and not snapshot.listing_done:
        listed = human.count(snapshot.files, "file")
        return f"stopped while listing ({listed} so far): {snapshot.files_done:,} fetched, {fetched}"
    if failed:
        return f"stopped: {snapshot.files_done:,} of {human.count(snapshot.files, 'file')} fetched, {fetched}"
    if not snapshot.files:
        return f"nothing to fetch: {human.count(snapshot.files_present, 'file')} already here"
    return f"fetched {human.count(snapshot.files_done, 'file')}, {fetched}"


class LiveView:
    """A progress reporter redrawing `frame` on stderr (or `console`, a rich Console) every `REDRAW_SECONDS`."""

    interval = REDRAW_SECONDS
    first = 0.0

    def __init__(self, console: Any = None) -> None:
        self._console = console
        self._live: Any = None

    def report(self, snapshot: Snapshot) -> None:
        if self._live is None:
            self._live = self._start()
        self._live.update(frame(snapshot, self._live.console.width), refresh=True)

    def close(self, snapshot: Snapshot, failed: bool) -> None:
        if self._live is None:
            return
        self._live.stop()  # transient: the block goes, the summary stays
        self._live.console.print(redact(summary(snapshot, failed)), highlight=False, markup=False)

    def _start(self) -> Any:
        """A rich Live block on stderr; what is printed to stderr meanwhile (the log lines) goes above it, and what
        is printed to stdout too when that is a terminal as well (stdout piped to a file stays there). Each redraw
        erases the rows the last frame takes now (`adapters.rich`): a terminal shrunk meanwhile rewrapped them."""
        from rich.console import Console

        from initializers.adapters.rich import rewrapping_live

        console = self._console or Console(
            file=sys.stderr, highlight=False, color_system="auto" if terminal.colours(sys.stderr) else None
        )
        live = rewrapping_live(
            console, auto_refresh=False, transient=True, redirect_stdout=sys.stdout.isatty(), redirect_stderr=True
        )
        live.start()
        return live


def frame(snapshot: Snapshot, width: int) -> Any:
    """The block for `width` columns: the first line (`head`: the bar and `status`), then `file_lines`."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    bar_width, text = head(snapshot, width)
    first = Table.grid(padding=(0, GAP))
    line = Text(redact(text), no_wrap=True, overflow="ellipsis")
    if bar_width:
        done = min(snapshot.bytes_done, snapshot.bytes)
        first.add_row(ProgressBar(total=max(snapshot.bytes, 1), completed=done, width=bar_width), line)
    else:
        first.add_row(line)
    return Group(first, *(Text(row, no_wrap=True, overflow="crop") for row in file_lines(snapshot, width)))
