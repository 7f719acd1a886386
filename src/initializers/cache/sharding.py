"""Cutting rows laid end to end into shards whose sizes differ by at most one row. Pure arithmetic, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """Rows [start, stop) of input number `input` (in the given order), destined for shard number `shard`."""

    shard: int
    input: int
    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


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
    pieces: list[Piece] = []
    boundaries = [shard_range(sum(row_counts), shards, index) for index in range(shards)]
    shard = 0
    offset = 0  # where the current input starts in the whole sequence
    for index, count in enumerate(row_counts):
        end = offset + count
        while shard < shards and boundaries[shard][0] < end:
            low, high = max(offset, boundaries[shard][0]), min(end, boundaries[shard][1])
            if low < high:
                pieces.append(Piece(shard, index, low - offset, high - offset))
            if boundaries[shard][1] > end:
                break
            shard += 1
        offset = end
    return sorted(pieces, key=lambda piece: (piece.shard, piece.input))
