"""The records of partial downloads: what a re-run may keep of a temporary, and what it must fetch."""

from __future__ import annotations

import json
from unittest import mock

from initializers.common.remote_file import RemoteFile
from initializers.destination import stable_storage
from initializers.destination.partials import header, merged, missing, read_partial

FILE = RemoteFile("d/big.bin", 100, "etag-1", "d/big.bin")


def test_intervals_join_and_the_gaps_are_what_they_leave():
    kept = merged([(50, 10), (0, 10), (5, 10), (15, 5), (90, 20)], 100)
    assert kept == ((0, 20), (50, 10), (90, 10))
    assert missing(kept, 100) == [(20, 30), (60, 30)]
    assert missing((), 100) == [(0, 100)]
    assert missing(((0, 100),), 100) == []


def test_a_record_names_its_file_and_keeps_whole_lines_only():
    record = header(FILE) + b"[0, 10]\n[40, 20]\n[60, 3"  # the last line cut off by a kill
    partial = read_partial(record)
    assert partial is not None and partial.of(FILE) and not partial.of(FILE._replace(version="etag-2"))
    assert partial.kept == ((0, 10), (40, 20)) and partial.kept_bytes == 30
    assert read_partial(b"") is None and read_partial(b"not json\n") is None


def test_after_a_reboot_only_what_a_sync_covered_is_trusted():
    head = header(FILE)
    covered = head + b"[0, 10]\n"
    record = covered + json.dumps({"synced": len(covered)}).encode() + b"\n[10, 10]\n"
    assert read_partial(record).kept == ((0, 20),)
    with mock.patch.object(stable_storage, "boot_id", return_value="another boot"):
        assert read_partial(record).kept == ((0, 10),)
