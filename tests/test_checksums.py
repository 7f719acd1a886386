"""CRC-32s of ranges combine into the whole file's, whatever the split and the order the ranges landed in."""

from __future__ import annotations

import hashlib
import itertools
import random
import threading
import zlib

from hypothesis import given
from hypothesis import strategies as st

from initializers.transfer.checksums import InOrderDigest, combined_crc32, crc32_combine


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


class _File:
    """Bytes read back by offset, counting what was read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.read_bytes = 0

    def read(self, offset: int, length: int) -> bytes:
        self.read_bytes += length
        return self.data[offset : offset + length]


def _ranges(data: bytes, cuts: list[int]) -> list[tuple[int, int]]:
    bounds = sorted({0, len(data), *(cut % len(data) for cut in cuts)})
    return [(start, end - start) for start, end in itertools.pairwise(bounds)]


@given(st.binary(min_size=1, max_size=20_000), st.lists(st.integers(min_value=0), max_size=12), st.randoms())
def test_ranges_landing_in_any_order_are_hashed_once_each_in_order(data: bytes, cuts: list[int], order: random.Random):
    file = _File(data)
    digest = InOrderDigest(hashlib.md5(usedforsecurity=False), len(data), file.read)
    ranges = _ranges(data, cuts)
    order.shuffle(ranges)
    for offset, length in ranges:
        digest.landed(offset, length)
    assert file.read_bytes == len(data)  # all hashed as they landed: none left for the end, none read twice
    assert digest.hexdigest() == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert file.read_bytes == len(data)


def test_a_range_is_hashed_as_soon_as_the_gap_before_it_closes_and_a_gap_gives_no_digest():
    file = _File(b"aaaabbbbcccc")
    digest = InOrderDigest(hashlib.sha256(), 12, file.read)
    digest.landed(4, 4)
    assert file.read_bytes == 0  # waits for the bytes before it
    digest.landed(0, 4)
    assert file.read_bytes == 8  # both, once the first landed
    assert digest.hexdigest() is None  # the last third never landed
    digest.landed(8, 4)
    assert digest.hexdigest() == hashlib.sha256(b"aaaabbbbcccc").hexdigest()


def test_ranges_landing_from_many_threads_at_once_give_the_files_digest():
    data = random.Random(7).randbytes(64 * 1024)
    file = _File(data)
    digest = InOrderDigest(hashlib.md5(usedforsecurity=False), len(data), file.read)
    ranges = _ranges(data, list(range(0, len(data), 1024)))
    random.Random(8).shuffle(ranges)
    start = threading.Barrier(8)

    def land(share: list[tuple[int, int]]) -> None:
        start.wait()
        for offset, length in share:
            digest.landed(offset, length)

    threads = [threading.Thread(target=land, args=(ranges[number::8],)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert digest.hexdigest() == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert file.read_bytes == len(data)
