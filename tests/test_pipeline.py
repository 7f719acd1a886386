"""Listing and transfer as one pipeline, in memory that does not grow with the number of files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devkit.programs import clean_env, command, run_program
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from initializers.sources.s3.source import CHAINED_PAGES

KEYS = 20_000
#: Beside the 20 k: keys directly under the prefix, before and after its folders, and one that must be decoded.
ODD_KEYS = {"k/0-first.txt": b"first", "k/top-1.txt": b"top 1", "k/top-2.txt": b"top 2", "k/3/direct \xe9+.txt": b"odd"}
#: Peak RSS of a run over 20 k keys. Python, botocore-free S3 code and SQLite need about 45 MB here whatever the
#: file count; holding the plan as Python objects cost about 2.4 KB per file, which would pass this bound by 8 MB.
RSS_BOUND_MB = 90


def body(number: int) -> bytes:
    return f"{number:06d}\n".encode() * 20


@pytest.fixture(scope="module")
def many(s3: Any) -> Iterator[str]:
    """A bucket of 20 k small objects, four prefixes of 5000, and the odd keys beside them."""
    name = "pipeline-many"
    s3.create_bucket(Bucket=name)
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda i: s3.put_object(Bucket=name, Key=f"k/{i % 4}/{i:06d}.txt", Body=body(i)), range(KEYS)))
        list(pool.map(lambda item: s3.put_object(Bucket=name, Key=item[0], Body=item[1]), ODD_KEYS.items()))
    yield name


def run_measured(env: dict[str, str]) -> tuple[int, float]:
    """The dataset program's exit code and peak RSS in MB, measured by a parent whose only child it is."""
    probe = (
        "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command("dataset")], env=clean_env(env), capture_output=True, text=True
    )
    code, rss_kb = done.stdout.split()
    return int(code), int(rss_kb) / 1024


def test_the_first_files_arrive_while_the_listing_goes_on(seaweed: SeaweedFS, many: str, tmp_path: Path):
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 400_000  # per connection: a listing page of 1000 keys takes about half a second
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{many}/k/1",
               "OUTPUT_PATH": str(tmp_path / "out"), "MAX_WORKERS": "4"}  # fmt: skip
        result = run_program("dataset", env)
        requests = list(relay.traffic.requests)
    assert result.code == 0, result.stdout + result.stderr
    listings = [i for i, (_, path) in enumerate(requests) if "list-type=" in path]
    assert len(listings) == 5  # 5000 keys, 1000 a page
    gets_before_last_page = [path for _, path in requests[: listings[-1]] if "list-type=" not in path]
    # Four transfers at a time, one object each: a fifth GET means a file was complete before the last page was
    # even asked for.
    assert len(gets_before_last_page) > 4
    assert len(list((tmp_path / "out").rglob("*.txt"))) == 5000


def test_20k_files_in_flat_memory_with_a_streamed_manifest(seaweed: SeaweedFS, many: str, tmp_path: Path):
    out = tmp_path / "out"
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{many}", "OUTPUT_PATH": str(out)}
    code, peak_mb = run_measured(env)
    assert code == 0
    assert peak_mb < RSS_BOUND_MB, f"peak RSS {peak_mb:.0f} MB over 20 k files"
    assert (out / "k" / "3" / "019999.txt").read_bytes() == body(19999)

    manifest_path = out / ".initializer" / "manifest.json"
    whole = json.loads(manifest_path.read_text())  # one JSON document, for any reader
    assert whole["format"] == 2 and whole["total_files"] == KEYS + len(ODD_KEYS)
    paths = [entry["path"] for entry in whole["files"]]
    assert paths == sorted(paths) and len(set(paths)) == KEYS + len(ODD_KEYS)
    lines = manifest_path.read_text().splitlines()  # and a stream: a head line, one line per file, a closing line
    assert len(lines) == KEYS + len(ODD_KEYS) + 2
    assert json.loads(lines[1].rstrip(","))["path"] == paths[0]
    assert not (out / ".initializer" / "index.sqlite").exists()

    again = run_program("dataset", env)
    assert again.code == 0 and again.named("up to date") and again.last["fetched_files"] == 0
    assert again.last["files"] == KEYS + len(ODD_KEYS)


def test_a_listing_longer_than_its_chain_is_cut_into_ranges_that_list_every_key_once(
    seaweed: SeaweedFS, many: str, tmp_path: Path
):
    out = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{many}/k", "OUTPUT_PATH": str(out)}
        result = run_program("dataset", env)
        listings = [path for _, path in relay.traffic.requests if "list-type=" in path]
    assert result.code == 0, result.stdout + result.stderr
    chain, rest = listings[:CHAINED_PAGES], listings[CHAINED_PAGES:]
    assert not any("delimiter=" in path or "start-after=" in path for path in chain)
    assert "delimiter=" in rest[0] and "start-after=" in rest[0], "the folders after the chain's last key"
    ranges = [path for path in rest if "start-after=" in path and "delimiter=" not in path]
    assert len(ranges) > 1
    # 21 pages of keys; cutting costs the delimiter page, a page per folder (4) to look one level down, and a page
    # per range past its end. Listing any of the folders in full twice would cost 5 pages more.
    assert len(listings) <= 21 + 1 + 4 + len(ranges), listings
    files = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()} - {
        path.relative_to(out).as_posix() for path in (out / ".initializer").rglob("*")
    }
    expected = {f"{i % 4}/{i:06d}.txt" for i in range(KEYS)} | {key.removeprefix("k/") for key in ODD_KEYS}
    assert files == expected
    assert all((out / key.removeprefix("k/")).read_bytes() == data for key, data in ODD_KEYS.items())
    assert (out / "2" / "012346.txt").read_bytes() == body(12346)
