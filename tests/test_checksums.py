"""CRC-32s of ranges combine into the whole file's, whatever the split and the order the ranges landed in."""

from __future__ import annotations

import itertools
import random
import zlib

from hypothesis import given
from hypothesis import strategies as st

from initializers.checksums import combined_crc32, crc32_combine


@given(st.binary(max_size=4096), st.binary(max_size=4096))
def test_crc32_combine_matches_zlib_over_the_concatenation(first: bytes, second: bytes):
    assert crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second)) == zlib.crc32(first + second)


@given(st.binary(min_size=1, max_size=20_000), st.lists(st.integers(min_value=0), max_size=12), st.randoms())
def test_ranges_in_any_order_combine_to_the_whole_files_crc(data: bytes, cuts: list[int], order: random.Random):
    bounds = sorted({0, len(data), *(cut % len(data) for cut in cuts)})
    ranges = [(start, end - start, zlib.crc32(data[start:end])) for start, end in itertools.pairwise(bounds)]
    order.shuffle(ranges)
    landed = {offset: (length, crc) for offset, length, crc in ranges}
    assert combined_crc32(landed, len(data)) == f"{zlib.crc32(data):08x}"


def test_ranges_that_do_not_tile_the_file_give_no_crc():
    part = zlib.crc32(b"abcd")
    assert combined_crc32({0: (4, part)}, 8) is None  # the second half never landed
    assert combined_crc32({0: (4, part), 5: (3, zlib.crc32(b"fgh"))}, 8) is None  # a gap
