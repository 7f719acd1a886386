"""Balanced shards from rows laid end to end: every row exactly once, in order, sizes within one row."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from initializers.cache.sharding import Piece, cut, shard_range, shard_sizes


@given(st.lists(st.integers(0, 50), max_size=12), st.integers(1, 9))
def test_pieces_cover_every_row_once_in_order_and_balance(row_counts: list[int], shards: int) -> None:
    pieces = cut(row_counts, shards)
    laid_out = [(piece.input, row) for piece in pieces for row in range(piece.start, piece.stop)]
    assert laid_out == [(index, row) for index, count in enumerate(row_counts) for row in range(count)]
    per_shard = [sum(p.rows for p in pieces if p.shard == shard) for shard in range(shards)]
    assert per_shard == shard_sizes(sum(row_counts), shards)
    assert max(per_shard) - min(per_shard) <= 1
    assert all(piece.rows > 0 for piece in pieces)


def test_a_file_straddling_a_boundary_is_cut_there() -> None:
    assert cut([1000, 1000], 4) == [
        Piece(0, 0, 0, 500),
        Piece(1, 0, 500, 1000),
        Piece(2, 1, 0, 500),
        Piece(3, 1, 500, 1000),
    ]
    assert cut([3, 0, 4], 3) == [Piece(0, 0, 0, 3), Piece(1, 2, 0, 2), Piece(2, 2, 2, 4)]
    assert shard_sizes(10, 4) == [3, 3, 2, 2]


@given(st.integers(0, 10_000), st.integers(1, 40))
def test_shard_ranges_are_the_shard_sizes_laid_end_to_end(total: int, shards: int) -> None:
    ranges = [shard_range(total, shards, index) for index in range(shards)]
    assert [stop - start for start, stop in ranges] == shard_sizes(total, shards)
    assert [start for start, _ in ranges] == [0, *(stop for _, stop in ranges[:-1])]
    assert ranges[-1][1] == total


def test_shard_ranges_of_a_small_table() -> None:
    assert [shard_range(10, 4, index) for index in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [shard_range(2, 3, index) for index in range(3)] == [(0, 1), (1, 2), (2, 2)]
