"""CRC-32s of ranges combine into the whole file's, whatever the split and the order the ranges landed in; other
digests take ranges in order as they land; a file's verifier checks it from what its parts fed, else from the file."""

from __future__ import annotations

import hashlib
import itertools
import random
import threading
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.sources.aws.bucket import CHECKSUM_KINDS
from initializers.sources.aws.crc32 import CRC32, CRC32_KIND
from initializers.sources.gcs.crc32c import CRC32C, CRC32C_KIND
from initializers.store.hashers import SHA256 as SHA256_KIND
from initializers.store.hashers import kinds
from initializers.store.retry import Retriable
from initializers.transfer.checksums import (
    ChecksumMismatch,
    FileVerifier,
    InOrderDigest,
    combined_crc,
    crc_combine,
)

CRC32_POLYNOMIAL, CRC32C_POLYNOMIAL = CRC32_KIND.crc_polynomial or 0, CRC32C_KIND.crc_polynomial or 0


@given(st.binary(max_size=4096), st.binary(max_size=4096))
def test_crc32_combine_matches_zlib_over_the_concatenation(first: bytes, second: bytes):
    whole = crc_combine(CRC32_POLYNOMIAL, zlib.crc32(first), zlib.crc32(second), len(second))
    assert whole == zlib.crc32(first + second)


@given(st.binary(min_size=1, max_size=20_000), st.lists(st.integers(min_value=0), max_size=12), st.randoms())
def test_ranges_in_any_order_combine_to_the_whole_files_crc(data: bytes, cuts: list[int], order: random.Random):
    bounds = sorted({0, len(data), *(cut % len(data) for cut in cuts)})
    ranges = [(start, end - start, zlib.crc32(data[start:end])) for start, end in itertools.pairwise(bounds)]
    order.shuffle(ranges)
    landed = {offset: (length, crc) for offset, length, crc in ranges}
    assert combined_crc(CRC32_POLYNOMIAL, landed, len(data)) == f"{zlib.crc32(data):08x}"


@given(st.binary(max_size=4096), st.binary(max_size=4096))
def test_crc32c_combines_as_google_crc32c_computes_the_concatenation(first: bytes, second: bytes):
    import google_crc32c

    whole = crc_combine(CRC32C_POLYNOMIAL, google_crc32c.value(first), google_crc32c.value(second), len(second))
    assert whole == google_crc32c.value(first + second)


def test_a_cloud_storage_objects_ranges_are_checked_by_their_combined_crc32c_without_reading_it_back():
    import google_crc32c

    data = bytes(range(256)) * 400
    expected = Checksum(CRC32C, f"{google_crc32c.value(data):08x}")
    verifier = FileVerifier(RemoteFile("o.bin", len(data), "1", "o.bin", expected), kinds(CRC32C_KIND), None)
    for offset in range(0, len(data), 30_000):
        part = data[offset : offset + 30_000]
        digest = verifier.part_digest(len(part))
        digest.update(memoryview(bytearray(part)))
        verifier.part_complete(offset, len(part), digest, _no_read_back)
    assert verifier.verify("/nonexistent: the combined CRC is enough") == expected


def _no_read_back(offset: int, length: int) -> bytes:
    raise AssertionError("combined CRCs need no reading back")


def test_ranges_that_do_not_tile_the_file_give_no_crc():
    part = zlib.crc32(b"abcd")
    assert combined_crc(CRC32_POLYNOMIAL, {0: (4, part)}, 8) is None  # the second half never landed
    assert combined_crc(CRC32_POLYNOMIAL, {0: (4, part), 5: (3, zlib.crc32(b"fgh"))}, 8) is None  # a gap


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
    digest = InOrderDigest(hashlib.md5(usedforsecurity=False), len(data))
    ranges = _ranges(data, cuts)
    order.shuffle(ranges)
    for offset, length in ranges:
        digest.part_complete(offset, length, file.read)
    assert file.read_bytes == len(data)  # all hashed as they landed: none left for the end, none read twice
    assert digest.hexdigest(file.read) == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert file.read_bytes == len(data)


def test_a_range_is_hashed_as_soon_as_the_gap_before_it_closes_and_a_gap_gives_no_digest():
    file = _File(b"aaaabbbbcccc")
    digest = InOrderDigest(hashlib.sha256(), 12)
    digest.part_complete(4, 4, file.read)
    assert file.read_bytes == 0  # waits for the bytes before it
    digest.part_complete(0, 4, file.read)
    assert file.read_bytes == 8  # both, once the first landed
    assert digest.hexdigest(file.read) is None  # the last third never landed
    digest.part_complete(8, 4, file.read)
    assert digest.hexdigest(file.read) == hashlib.sha256(b"aaaabbbbcccc").hexdigest()


def test_ranges_landing_from_many_threads_at_once_give_the_files_digest():
    data = random.Random(7).randbytes(64 * 1024)
    file = _File(data)
    digest = InOrderDigest(hashlib.md5(usedforsecurity=False), len(data))
    ranges = _ranges(data, list(range(0, len(data), 1024)))
    random.Random(8).shuffle(ranges)
    start = threading.Barrier(8)

    def land(share: list[tuple[int, int]]) -> None:
        start.wait()
        for offset, length in share:
            digest.part_complete(offset, length, file.read)

    threads = [threading.Thread(target=land, args=(ranges[number::8],)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert digest.hexdigest(file.read) == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert file.read_bytes == len(data)


DATA = random.Random(9).randbytes(10_000)
CRC = Checksum(CRC32, f"{zlib.crc32(DATA):08x}")
SHA256 = Checksum("sha256", hashlib.sha256(DATA).hexdigest())
#: Where verification would read the file from, were it to: nothing is there, so a test passes only if it did not.
UNREAD = "/nonexistent/f.bin"


def verifier(listed: Checksum | None) -> FileVerifier:
    return FileVerifier(RemoteFile("f.bin", len(DATA), "v1", "bucket/f.bin", listed), CHECKSUM_KINDS, None)


def feed(verifier: FileVerifier, offset: int, length: int, file: _File | None = None) -> None:
    """A part arriving: its bytes through the digest it is handed, then landed (read back from `file` if hashed in
    order)."""
    digest = verifier.part_digest(length)
    if digest is not None:
        digest.update(DATA[offset : offset + length])
    verifier.part_complete(offset, length, digest, (file or _File(DATA)).read)


@pytest.mark.parametrize("listed", [CRC, SHA256, Checksum("md5", hashlib.md5(DATA).hexdigest())])
def test_a_file_in_one_part_is_checked_in_stream(listed: Checksum):
    check = verifier(listed)
    feed(check, 0, len(DATA))
    check.finish_hashing(_File(DATA).read)
    assert check.verify(UNREAD) == listed


def test_ranges_crcs_landing_out_of_order_combine_without_reading_the_file():
    file = _File(DATA)
    check = verifier(CRC)
    for offset in (6000, 0, 3000, 9000):
        feed(check, offset, min(3000, len(DATA) - offset), file)
    check.finish_hashing(file.read)
    assert check.verify(UNREAD) == CRC and file.read_bytes == 0


def test_ranges_in_another_digest_are_hashed_in_order_as_they_land():
    file = _File(DATA)
    check = verifier(SHA256)
    for offset in (5000, 0):
        feed(check, offset, 5000, file)
    check.finish_hashing(file.read)
    assert check.verify(UNREAD) == SHA256 and file.read_bytes == len(DATA)


def test_a_gap_in_the_ranges_hashed_in_order_is_made_up_by_hashing_the_file(tmp_path: Path):
    check = verifier(None)
    feed(check, 0, 4000)  # nothing to check against yet: hashed by nothing
    check.expect(SHA256)  # a later answer vouches for the file
    feed(check, 4000, 6000)
    check.finish_hashing(_File(DATA).read)
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    assert check.verify(str(path)) == SHA256
    path.write_bytes(b"x" + DATA[1:])  # the first range, read from the file
    with pytest.raises(ChecksumMismatch, match="sha256 checksum mismatch"):
        check.verify(str(path))


def test_the_first_checksum_vouched_for_stands_and_another_in_its_algorithm_means_the_file_changed():
    check = verifier(None)
    check.expect(CRC)
    check.expect(SHA256)  # another algorithm: nothing to compare, the first still stands
    check.expect(CRC)
    with pytest.raises(FetchError, match=r"bucket/f.bin changed during the download \(crc32 .* became 00000000\)"):
        check.expect(Checksum(CRC32, "00000000"))
    feed(check, 0, len(DATA))
    assert check.verify(UNREAD) == CRC


def test_a_mismatch_is_retriable_and_a_reset_starts_the_check_over():
    check = verifier(None)
    check.expect(CRC)
    feed(check, 0, 5000)
    # A range whose bytes never went through its digest:
    check.part_complete(5000, 5000, check.part_digest(5000), _File(DATA).read)
    with pytest.raises(ChecksumMismatch, match="crc32 checksum mismatch") as mismatch:
        check.verify(UNREAD)
    assert isinstance(mismatch.value, Retriable) and not mismatch.value.throttled
    check.reset()  # fetched again: what was vouched for and hashed is forgotten
    check.expect(SHA256)
    feed(check, 0, len(DATA))
    assert check.verify(UNREAD) == SHA256


def late(kind: str) -> FileVerifier:
    """The verifier of a file listed without a checksum, whose store vouches for it in `kind` once it has read it."""
    return FileVerifier(RemoteFile("f.bin", len(DATA), "v1", "bucket/f.bin", None), CHECKSUM_KINDS, kind)


@pytest.mark.parametrize("cuts", [[0], [0, 3000, 6000, 9000]], ids=["whole", "ranges"])
@pytest.mark.parametrize("word", [CRC, SHA256], ids=["crc32", "sha256"])
def test_a_word_given_after_the_last_byte_is_checked_from_the_bytes_hashed_as_they_landed(
    word: Checksum, cuts: list[int]
):
    """A store that vouches late (a trailer, a digest computed as it reads) has every byte hashed in its kind from the
    first: its word is checked in one pass, the file never read again (ranges in order as they land, or combined)."""
    file, check = _File(DATA), late(word.algorithm)
    for offset, end in itertools.pairwise([*cuts, len(DATA)]):
        feed(check, offset, end - offset, file)
    check.expect(word)  # once the last byte is in
    check.finish_hashing(file.read)
    assert check.verify(UNREAD) == word
    assert file.read_bytes == (len(DATA) if word is SHA256 and len(cuts) > 1 else 0)


def test_a_late_word_the_bytes_miss_is_a_mismatch_and_one_in_another_kind_is_refused():
    check = late("sha256")
    feed(check, 0, len(DATA))
    check.expect(Checksum("sha256", hashlib.sha256(b"other bytes").hexdigest()))
    with pytest.raises(ChecksumMismatch, match="sha256 checksum mismatch"):
        check.verify(UNREAD)
    with pytest.raises(FetchError, match=r"bucket/f.bin: vouched for by a crc32 checksum after .* hashed in sha256"):
        late("sha256").expect(CRC)


def test_a_checksum_of_a_kind_its_store_does_not_declare_is_refused():
    check = FileVerifier(RemoteFile("f.bin", len(DATA), "v1", "bucket/f.bin", CRC), kinds(SHA256_KIND), None)
    with pytest.raises(FetchError, match=r"bucket/f.bin: vouched for by a crc32 checksum, a kind its store does not"):
        check.part_digest(len(DATA))
