"""The completion manifest: what was fetched, from which version, how verified. Its presence means complete.

One JSON document (any JSON reader takes it whole), laid out to be streamed whatever the number of files: the first
line holds all but the file entries and opens the `files` array, then one entry a line in path order, then `]}`.
"""

from __future__ import annotations

import contextlib
import json
import operator
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from initializers import __version__
from initializers.common.logs import redact
from initializers.common.remote_file import RemoteFile
from initializers.common.uri_credentials import masked
from initializers.config.contract import Kind
from initializers.destination.done import DoneFile

FORMAT = 2
_OPENING = '"files": ['
_CLOSING = "]}\n"
_CLOSING_TEXT = _CLOSING.rstrip()  # the last line, as it reads without its newline


def lines(
    kind: Kind,
    source: dict[str, Any],
    ignore_patterns: tuple[str, ...],
    started_at: datetime,
    finished_at: datetime,
    totals: tuple[int, int],
    files: Iterable[tuple[RemoteFile, DoneFile]],
    allow_patterns: tuple[str, ...] = (),
    signature: dict[str, Any] | None = None,
    this_run: dict[str, int] | None = None,
) -> Iterator[bytes]:
    """The manifest, an entry at a time, for `files` in path order, each as finished; `signature`: the verdict on the
    publisher's signature (SIGNATURE), if checked; `this_run`: what this run fetched and kept (a share: its own)."""
    head = {
        "format": FORMAT,
        "tool": {"name": kind.program, "version": __version__},
        "source": _public(source),
        **({"allow_patterns": list(allow_patterns)} if allow_patterns else {}),
        "ignore_patterns": list(ignore_patterns),
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "total_files": totals[0],
        "total_bytes": totals[1],
        **({"this_run": this_run} if this_run is not None else {}),
        **({"signature": signature} if signature is not None else {}),
    }
    yield (json.dumps(head)[:-1] + ", " + _OPENING).encode()
    separator = "\n"
    for file, done in files:
        yield (separator + json.dumps(_entry(file, done))).encode()
        separator = ",\n"
    yield ("\n" + _CLOSING).encode()


def _public(source: dict[str, Any]) -> dict[str, Any]:
    """The source as the manifest records it: URIs masked (`masked`), secrets (an endpoint's user info) redacted."""
    shown = {name: masked(value) if isinstance(value, str) else value for name, value in source.items()}
    return json.loads(redact(json.dumps(shown)))  # type: ignore[no-any-return]


#: What a manifest entry without a checksum says was verified: the size, and the version the requests were pinned
#: to (an S3 object's ETag, with If-Match), for a file the source stores without a digest of its content.
SIZE_AND_VERSION = "size+version"
#: ... and for a file the initializer made itself (a cache shard part), whose size is known only once it is made: the
#: version it was made from (the table's snapshot), and nothing of its content.
MADE_FROM_VERSION = "made from version"


def _entry(file: RemoteFile, done: DoneFile) -> dict[str, Any]:
    """The file's record, with the checksum its bytes were verified against (`DoneFile.verified_against`)."""
    entry: dict[str, Any] = {"path": file.path, "size": done.size, "version": file.version, "mtime_ns": done.mtime_ns}
    if (checksum := done.verified_against(file)) is not None:
        entry["checksum"] = {"algorithm": checksum.algorithm, "hexdigest": checksum.hexdigest}
    else:
        entry["verified"] = SIZE_AND_VERSION if file.exact_size else MADE_FROM_VERSION
    return entry


def read_head(path: Path) -> dict[str, Any] | None:
    """Everything but the file entries, or None when there is no readable manifest."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline()
            if first.rstrip("\n").endswith(_OPENING):
                return json.loads(first.rstrip("\n") + _CLOSING)
            handle.seek(0)
            document = json.load(handle)  # an earlier format, laid out differently: small enough to read whole
    except (OSError, ValueError):
        return None
    return {key: value for key, value in document.items() if key != "files"} if isinstance(document, dict) else None


def read_files(path: Path) -> Iterator[DoneFile]:
    """The entries of a readable manifest as finished files; entries that do not parse are skipped."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, after the generator is consumed
    except OSError:
        return
    with handle:
        first = handle.readline()
        if first.rstrip("\n").endswith(_OPENING):
            entries: Iterable[Any] = _entry_lines(handle)
        else:
            handle.seek(0)
            try:
                entries = list(json.load(handle).get("files", []))
            except (ValueError, AttributeError, TypeError):
                return
        for entry in entries:
            try:
                checksum = entry.get("checksum") or {}
                yield DoneFile(*_DONE_FIELDS(entry), checksum.get("algorithm"), checksum.get("hexdigest"))
            except (AttributeError, KeyError, TypeError):  # no object, a field missing: not a finished file
                continue


_DONE_FIELDS = operator.itemgetter("path", "size", "version", "mtime_ns")
#: Entry lines parsed together, as one JSON array: one parser call for many small documents costs far less.
_CHUNK_BYTES = 1 << 18


def _entry_lines(handle: TextIO) -> Iterator[Any]:
    """The entries after the opening line, a chunk of whole lines at a time; a chunk that does not parse (a damaged
    line) is parsed again line by line, so only the damaged lines are lost."""
    while lines := handle.readlines(_CHUNK_BYTES):
        text = "".join(lines).rstrip().removesuffix(_CLOSING_TEXT).rstrip()
        try:
            yield from json.loads("[" + text.rstrip(",") + "]")
        except ValueError:
            for line in lines:
                text = line.rstrip("\n").rstrip(",")
                if text and text != _CLOSING_TEXT:
                    with contextlib.suppress(ValueError):
                        yield json.loads(text)


def describes(head: dict[str, Any] | None, source: dict[str, Any], files: int) -> bool:
    """True when an existing manifest claims this source and as many files (whose versions the caller checked)."""
    return (
        bool(head)
        and head.get("format") == FORMAT
        and head.get("source") == _public(source)
        and head.get("total_files") == files
    )
