"""The manifest read back: every entry the streamed document holds, whatever its size, and nothing a damaged line
would make up."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from initializers.common.remote_file import RemoteFile
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.sources import DATASET

#: Enough entries for the document to be read in several chunks.
ENTRIES = 6000


def _write(path: Path, count: int) -> list[DoneFile]:
    done = [DoneFile(f"d{i % 7}/f{i:06d}.bin", i, f"v{i}", 10**18 + i) for i in range(count)]
    files = [(RemoteFile(d.path, d.size, d.version, d.path), d) for d in done]
    now = datetime.now(UTC)
    path.write_bytes(b"".join(manifest.lines(DATASET, {"uri": "s3://b"}, (), now, now, (count, 0), files)))
    return done


def test_every_entry_of_a_large_manifest_is_read_back(tmp_path: Path):
    path = tmp_path / "manifest.json"
    done = _write(path, ENTRIES)
    assert list(manifest.read_files(path)) == done
    assert len(json.loads(path.read_text())["files"]) == ENTRIES  # and it is still one JSON document


def test_a_damaged_line_loses_only_its_own_entry(tmp_path: Path):
    path = tmp_path / "manifest.json"
    done = _write(path, ENTRIES)
    lines = path.read_text().splitlines(keepends=True)
    lines[1 + 3000] = '{"path": "d0/f003000.bin", "size": 30\n'  # cut short, as a torn write would leave it
    lines[1 + 4000] = '{"path": "d3/f004000.bin"},\n'  # parses, but is not a finished file
    path.write_text("".join(lines))
    assert list(manifest.read_files(path)) == done[:3000] + done[3001:4000] + done[4001:]


def test_an_empty_manifest_and_a_missing_one_hold_no_files(tmp_path: Path):
    path = tmp_path / "manifest.json"
    assert _write(path, 0) == []
    assert list(manifest.read_files(path)) == []
    assert list(manifest.read_files(tmp_path / "absent.json")) == []


def test_a_manifest_of_the_earlier_layout_is_read_whole(tmp_path: Path):
    path = tmp_path / "manifest.json"
    entry = {"path": "a.bin", "size": 3, "version": "v", "mtime_ns": 7, "checksum": None}
    path.write_text(json.dumps({"format": 1, "files": [entry, {"path": "b.bin"}]}, indent=2))
    assert list(manifest.read_files(path)) == [DoneFile("a.bin", 3, "v", 7)]


def test_entries_of_another_shape_are_skipped_not_a_crash(tmp_path: Path):
    """A manifest is read back from the volume, where anything may have written: an entry that is no object, a
    checksum that is no object, or files that are no list, are no finished file."""
    path = tmp_path / "manifest.json"
    good = {
        "path": "a.bin",
        "size": 3,
        "version": "v",
        "mtime_ns": 7,
        "checksum": {"algorithm": "md5", "hexdigest": "0"},
    }
    odd = [5, "a.bin", None, [], {**good, "checksum": "md5"}]
    path.write_text(json.dumps({"format": 1, "files": [*odd, good]}))
    assert list(manifest.read_files(path)) == [DoneFile("a.bin", 3, "v", 7, "md5", "0")]
    for files in (5, "a.bin", None):
        path.write_text(json.dumps({"format": 1, "files": files}))
        assert list(manifest.read_files(path)) == []
    _write(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = "7,\n"  # the streamed layout: a line that parses, but as a number
    path.write_text("".join(lines))
    assert len(list(manifest.read_files(path))) == 1
