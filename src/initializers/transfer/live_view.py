"""The live view on a terminal: one block, redrawn in place (rich), with the bytes and files done, the rate, the
ETA and the largest files in flight; the listing's state until its total is known; a summary line that stays.

Only a run whose stderr is a terminal shows it, and rich is imported only then. Its text goes through the logs'
redaction (a path or a URI may carry a secret), and log lines printed meanwhile go above the block, not through it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from initializers.common import human
from initializers.common.logs import redact
from initializers.transfer.progress import Snapshot

#: Seconds between redraws; the first comes at once, so the view is up within a second of the run's start.
REDRAW_SECONDS = 0.25
#: Columns of the bar before the first line's text, once the total is known.
BAR_WIDTH = 24
#: The largest files in flight shown, one line each.
FILES_SHOWN = 5


def wanted(log_format: str | None) -> bool:
    """Whether a run shows the live view: stderr is a terminal that can redraw, and JSON logs were not asked for
    (LOG_FORMAT=json keeps a terminal run as a log collector sees it)."""
    return log_format != "json" and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def status(snapshot: Snapshot) -> str:
    """The block's first line: the listing's state while it goes on, then percent, sizes, rate, ETA and files."""
    if not snapshot.listing_done:
        listed = human.count(snapshot.files + snapshot.files_present, "file")
        present = f" ({snapshot.files_present:,} already here)" if snapshot.files_present else ""
        return (
            f"listing... {listed} so far{present}; {human.size(snapshot.bytes)} to fetch, "
            f"{human.size(snapshot.bytes_done)} fetched at {human.rate(snapshot.rate)}"
        )
    percent, eta = snapshot.percent, snapshot.eta
    return (
        f"{percent:5.1f}%  {human.size(snapshot.bytes_done)} / {human.size(snapshot.bytes)}  "
        f"{human.rate(snapshot.rate)}  ETA {'-' if eta is None else human.duration(eta)}  "
        f"files {snapshot.files_done:,}/{snapshot.files:,}"
    )


def file_lines(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The largest files in flight: (path, how far it got)."""
    return [
        (file.path, f"{human.size(file.landed)} / {human.size(file.size)} {100 * file.landed // file.size:3d}%")
        if file.size
        else (file.path, human.size(0))
        for file in snapshot.in_flight[:FILES_SHOWN]
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
    """A progress reporter drawing `status` and `file_lines` on stderr, redrawn every `REDRAW_SECONDS`."""

    interval = REDRAW_SECONDS
    first = 0.0

    def __init__(self) -> None:
        self._live: Any = None

    def report(self, snapshot: Snapshot) -> None:
        if self._live is None:
            self._live = self._start()
        self._live.update(self._frame(snapshot), refresh=True)

    def close(self, snapshot: Snapshot, failed: bool) -> None:
        if self._live is None:
            return
        self._live.stop()  # transient: the block goes, the summary stays
        self._live.console.print(redact(summary(snapshot, failed)), highlight=False, markup=False)

    @staticmethod
    def _start() -> Any:
        """A rich Live block on stderr; what is printed to stdout or stderr meanwhile (the log lines on a terminal)
        goes above it. Stdout is taken over only when it is a terminal too: JSON logs piped to a file stay there."""
        from rich.console import Console
        from rich.live import Live

        live = Live(
            console=Console(file=sys.stderr, highlight=False),
            auto_refresh=False,
            transient=True,
            redirect_stdout=sys.stdout.isatty(),
            redirect_stderr=True,
        )
        live.start()
        return live

    @staticmethod
    def _frame(snapshot: Snapshot) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        head = Table.grid(padding=(0, 2))
        line = Text(redact(status(snapshot)), no_wrap=True, overflow="ellipsis")
        if snapshot.listing_done:
            done = min(snapshot.bytes_done, snapshot.bytes)
            head.add_row(ProgressBar(total=max(snapshot.bytes, 1), completed=done, width=BAR_WIDTH), line)
        else:
            head.add_row(line)
        files = Table.grid(padding=(0, 2))
        files.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        files.add_column(justify="right", no_wrap=True)
        for path, done in file_lines(snapshot):
            files.add_row(Text(redact(f"  {path}")), Text(done))
        return Group(head, files)
