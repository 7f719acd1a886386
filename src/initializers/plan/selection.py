"""Which listed files a run fetches: ALLOW_PATTERNS, IGNORE_PATTERNS, and the kind's default selection.

A file is fetched when the allow side matches it (an empty allow side matches every file) and the ignore side does not.
While IGNORE_PATTERNS is unset, or exactly the list the Kubeflow SDK sends by default, the kind's default applies: for
models, what a trainer loads (`Kind.default_allow`): its allow side, ALLOW_PATTERNS when given; its ignore side, other
runtimes' copies; and of the weight formats, only the first the source has. Any other IGNORE_PATTERNS replaces the whole
default. What is skipped, and its bytes, is logged by reason and returned at the listing's end.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.config.contract import Config, Kind, WeightFormat
from initializers.config.patterns import Globs

#: Paths named per reason in the log.
EXAMPLES = 5
#: The rule that skips an empty object named like a folder (`d/`, or the prefix itself), which consoles and tools
#: make to show a folder: no file. One with bytes in it cannot land as a file either, and is refused (`safe_paths`).
PLACEHOLDERS = "empty folder placeholders"


def names_a_folder(path: str) -> bool:
    """A listed path that names a folder, not a file: it ends in `/`, or it is the prefix listed itself ("")."""
    return not path or path.endswith("/")


@dataclass
class Skipped:
    """The files one rule skipped."""

    files: int = 0
    bytes: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, file: RemoteFile) -> None:
        self.files += 1
        self.bytes += file.size
        if len(self.first) < EXAMPLES:
            self.first.append(file.path)


@dataclass(frozen=True)
class Selected:
    """What the selection found once the listing had ended."""

    listed: int  # files the source listed
    skipped: dict[str, Skipped]  # by the rule that left them out
    #: What the manifest records as ignored: the ignore side and the patterns of the weight formats given up.
    ignored_patterns: tuple[str, ...]
    #: Every path left out, when the selection was asked to remember them (`Selection(keep=...)`).
    left_out: frozenset[str] = frozenset()

    def skipped_totals(self) -> tuple[int, int]:
        """(files, bytes) the rules left out."""
        return sum(s.files for s in self.skipped.values()), sum(s.bytes for s in self.skipped.values())


class Selection:
    """The rules of one run, applied to its listing as it streams."""

    def __init__(self, config: Config, kind: Kind, log: Any, keep: str | None = None) -> None:
        """`keep`: a path fetched whatever the rules say (the signature file), and the selection then remembers
        every path it leaves out, for the signature check to tell a file left out from one missing."""
        by_default = config.selects_by_default(kind)
        self.allow = Globs(config.allow_patterns or (kind.default_allow if by_default else ()))
        self.ignore = Globs(kind.default_ignore if by_default else config.ignore_patterns or ())
        self._formats = kind.weight_formats if by_default else ()
        self._allow_rule = "ALLOW_PATTERNS" if config.allow_patterns else f"the {kind.name} default's allow list"
        self._ignore_rule = f"the {kind.name} default's ignore list" if by_default else "IGNORE_PATTERNS"
        self._log = log
        self._keep = keep
        self._left_out: set[str] | None = set() if keep is not None else None

    def filter(self, files: Iterable[RemoteFile]) -> Generator[RemoteFile, None, Selected]:
        """The files to fetch, as they are listed (weights of a format a better one may replace are held back until the
        listing shows whether it does); returns what was skipped, which it logs. Raises when every file was skipped."""
        by_patterns = KeepsReturnValue(self._by_patterns(files))
        by_format = KeepsReturnValue(self._one_weight_format(iter(by_patterns)))
        yield from by_format
        (listed, skipped), (dropped, skipped_formats) = by_patterns.value, by_format.value
        skipped.update(skipped_formats)  # rules of their own: no name in common
        ignored = (*self.ignore.patterns, *(p for f in dropped for p in (*f.patterns, *f.companions)))
        selected = Selected(listed, skipped, ignored, frozenset(self._left_out or ()))
        files_skipped, bytes_skipped = selected.skipped_totals()  # each listed file is kept, or skipped by one rule
        if skipped:
            by_rule = {rule: vars(s) for rule, s in skipped.items()}
            self._log.info("skipped", files=files_skipped, bytes=bytes_skipped, by=by_rule)
        placeholders = skipped[PLACEHOLDERS].files if PLACEHOLDERS in skipped else 0
        if files_skipped == selected.listed > placeholders:  # folders alone are a source without files (`plan_files`)
            raise FetchError(f"nothing to download: all {selected.listed} files are excluded by {self.describe()}")
        return selected

    def describe(self) -> str:
        """The rules in effect, for messages."""
        parts = [f"{self._allow_rule} {','.join(self.allow.patterns)!r}"] if self.allow else []
        if self.ignore:
            parts.append(f"{self._ignore_rule} {','.join(self.ignore.patterns)!r}")
        if self._formats:
            parts.append("keeping one weight format (" + ", else ".join(f.name for f in self._formats) + ")")
        return " and ".join(parts) or "no rules"

    def _by_patterns(self, files: Iterable[RemoteFile]) -> Generator[RemoteFile, None, tuple[int, dict[str, Skipped]]]:
        """The files the patterns keep; returns how many were listed, and what each pattern rule skipped."""
        listed = 0
        skipped: dict[str, Skipped] = {}
        for file in files:
            listed += 1
            if file.path == self._keep:
                yield file
            elif names_a_folder(file.path) and not file.size:
                self._skip(skipped, file, PLACEHOLDERS)
            elif self.allow and not self.allow.match(file.path):
                self._skip(skipped, file, self._allow_rule)
            elif self.ignore.match(file.path):
                self._skip(skipped, file, self._ignore_rule)
            else:
                yield file
        return listed, skipped

    def _one_weight_format(
        self, files: Iterator[RemoteFile]
    ) -> Generator[RemoteFile, None, tuple[list[WeightFormat], dict[str, Skipped]]]:
        """Files of the first format are passed at once; those of the others (and their companions) are held until a
        better format is listed, which drops them, or the listing ends, which releases the best format's. Returns
        the formats given up for a better one, and the files they had."""
        skipped: dict[str, Skipped] = {}
        if not self._formats:
            yield from files
            return [], skipped
        matchers = [(Globs(f.patterns), Globs(f.companions)) for f in self._formats]
        best: int | None = None  # the most preferred format listed so far
        held: dict[int, list[RemoteFile]] = {}
        for file in files:
            found = _weight_format_of(file.path, matchers)
            if found is None:
                yield file
                continue
            rank, is_weights = found
            if best is not None and rank > best:
                self._skip(skipped, file, "another weight format")
                continue
            if is_weights and (best is None or rank < best):
                best = rank
                for worse in [r for r in held if r > rank]:
                    for dropped in held.pop(worse):
                        self._skip(skipped, dropped, "another weight format")
            if rank == 0:
                yield file
            else:
                held.setdefault(rank, []).append(file)
        for rank, waiting in sorted(held.items()):
            if best is None or rank == best:
                yield from waiting
            else:
                for dropped in waiting:
                    self._skip(skipped, dropped, "another weight format")
        if best:
            self._log.info(
                f"keeping {self._formats[best].name} weights",
                reason=f"the source has no {self._formats[0].name} weights, and the default selection would leave the "
                "model without any; set IGNORE_PATTERNS explicitly to override",
            )
        return [f for rank, f in enumerate(self._formats) if best is not None and rank > best], skipped

    def _skip(self, skipped: dict[str, Skipped], file: RemoteFile, rule: str) -> None:
        skipped.setdefault(rule, Skipped()).add(file)
        if self._left_out is not None:
            self._left_out.add(file.path)


def _weight_format_of(path: str, matchers: list[tuple[Globs, Globs]]) -> tuple[int, bool] | None:
    """(rank, whether it is the weights themselves) of the first format whose weights or companions `path` is."""
    for rank, (weights, companions) in enumerate(matchers):
        if weights.match(path):
            return rank, True
        if companions.match(path):
            return rank, False
    return None
