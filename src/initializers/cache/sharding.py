"""Cutting rows laid end to end into shards whose sizes differ by at most one row. Pure arithmetic, no I/O."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass


class Span:
    """Rows [start, stop) of one input: `rows` of them (for the dataclasses that declare both)."""

    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Piece(Span):
    """Rows [start, stop) of input number `input` (in the given order), destined for shard number `shard`."""

    shard: int
    input: int
    start: int
    stop: int


def shard_sizes(total: int, shards: int) -> list[int]:
    """`total` rows over `shards` shards, the first `total % shards` of them one row larger."""
    base, extra = divmod(total, shards)
    return [base + (1 if index < extra else 0) for index in range(shards)]


def shard_range(total: int, shards: int, index: int) -> tuple[int, int]:
    """Rows [start, stop) of shard `index` when `total` rows laid end to end are cut as `shard_sizes` cuts them:
    the ceiling of total / shards for the first `total % shards` shards, the floor for the rest."""
    base, extra = divmod(total, shards)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def cut(row_counts: Sequence[int], shards: int) -> list[Piece]:
    """Lay the inputs end to end and cut them into balanced shards; inputs without rows give no pieces. Pieces come in
    shard order, then in input order, so reading a shard's pieces in order reads its rows in table order."""
    starts = list(itertools.accumulate(row_counts, initial=0))  # where each input starts in the whole sequence
    pieces = []
    for shard in range(shards):
        low, high = shard_range(starts[-1], shards, shard)
        for index in range(bisect.bisect_right(starts, low) - 1, bisect.bisect_left(starts, high)):
            start, stop = max(low, starts[index]), min(high, starts[index + 1])
            if start < stop:
                pieces.append(Piece(shard, index, start - starts[index], stop - starts[index]))
    return pieces
