"""Which planned files still need a transfer: a file an earlier run finished, at the size and version the source offers
and untouched on disk (with VERIFY, still hashing to the checksum it was verified against then), is skipped.

`still_to_fetch` runs on the listing's thread, a stream the transfers consume as it goes: one `Fetching` before the
first file to fetch (the caller withdraws the manifest there), then the files; it returns what it counted (`Listed`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.destination.state import StateDir
from initializers.plan.index import PlanIndex
from initializers.store.hashers import HashKind
from initializers.transfer.checksums import file_hexdigest, kind_of
from initializers.transfer.progress import Progress


@dataclass(frozen=True)
class Fetching:
    """`still_to_fetch` reached the first file to fetch, with `already_done` planned files skipped before it."""

    already_done: int


@dataclass(frozen=True)
class Listed:
    """What `still_to_fetch` found, once the listing ended: planned files (this share's, when the plan is split), those
    skipped as done, and how many of those the manifest already lists."""

    planned: int
    done: int
    in_manifest: int


class Verdict(Enum):
    """What VERIFY finds of a done file."""

    INTACT = "intact"
    UNVERIFIABLE = "without checksum"  # only its size was checked when fetched: trusted by size and mtime
    DIFFERS = "differs"


def verdict(file: RemoteFile, done: DoneFile, digest: Callable[[Checksum], str]) -> Verdict:
    """Whether a done file's bytes still hash to the checksum they were verified against when fetched; `digest`
    hashes the file on disk in a checksum's algorithm. Only that checksum counts, never one the source might offer
    now: an ETag that merely looks like an MD5 (SSE-KMS) would send the file to be fetched again on every run."""
    checksum = done.verified_against(file)
    if checksum is None:
        return Verdict.UNVERIFIABLE
    return Verdict.INTACT if digest(checksum) == checksum.hexdigest else Verdict.DIFFERS


def take_stock(index: PlanIndex, state: StateDir, log: Any) -> dict[str, Any] | None:
    """What earlier runs finished, into the plan: the manifests' files and the journal's; the partial downloads a re-run
    can resume are kept, the other temporaries go. Returns the manifest's head as found, before this run touches it."""
    previous = manifest.read_head(state.manifest_path)
    index.add_finished(manifest.read_files(state.withdrawn_manifest_path), in_manifest=False)
    index.add_finished(manifest.read_files(state.manifest_path), in_manifest=True)
    index.add_finished(state.journal.files(), in_manifest=False)
    state.journal.restart(state.journal.files())  # the manifests stay where they are: no need to copy them
    partials = state.temps.keep_partials()  # the others go
    if partials:
        log.info("resuming", files=len(partials), already_here=sum(partial.kept_bytes for partial in partials))
    return previous


def files_only(stream: Iterator[RemoteFile | Fetching]) -> Iterator[RemoteFile]:
    """The files of `still_to_fetch`'s stream once its one `Fetching` has been taken."""
    for item in stream:
        if not isinstance(item, RemoteFile):
            raise AssertionError(f"still_to_fetch yielded {item!r} after its files began")
        yield item


def still_to_fetch(
    batches: Iterator[list[RemoteFile]],
    index: PlanIndex,
    state: StateDir,
    progress: Progress,
    log: Any,
    verify: Mapping[str, HashKind] | None,
) -> Generator[RemoteFile | Fetching, None, Listed]:
    """The planned files still to fetch, after one `Fetching`; `verify`: with VERIFY, the checksum kinds the source
    declares, by which done files are hashed again (see `verdict`). The free space is checked as the bytes to fetch
    add up, before the file that would not fit."""
    free = state.destination.free_space()
    planned = done = in_manifest = todo_bytes = 0
    started = False
    found = {verdict: 0 for verdict in Verdict}
    for batch in batches:
        finished = index.finished_among(batch)
        for file in batch:
            planned += 1
            record = finished.get(file.path)
            if record is not None and state.destination.unchanged(record[0]):
                seen = _verified(file, record[0], state, verify) if verify is not None else Verdict.INTACT
                found[seen] += 1
                if seen is Verdict.DIFFERS:
                    log.warning("differs from its checksum, fetching it again", path=file.path)
                else:
                    done += 1
                    in_manifest += record[1]
                    progress.add_present()
                    continue
            if not started:
                started = True
                yield Fetching(done)
            todo_bytes += file.size
            state.destination.check_free_space(todo_bytes, free)
            progress.add_todo(file.size)
            yield file
    progress.listing_done = True
    if verify is not None:
        log.info(
            "verified",
            files=done - found[Verdict.UNVERIFIABLE],
            differing=found[Verdict.DIFFERS],
            without_checksum=found[Verdict.UNVERIFIABLE],
        )
    return Listed(planned, done, in_manifest)


def _verified(file: RemoteFile, done: DoneFile, state: StateDir, kinds: Mapping[str, HashKind]) -> Verdict:
    path = state.destination.final_path(file.path)

    def digest(checksum: Checksum) -> str:
        return file_hexdigest(path, kind_of(kinds, checksum.algorithm, path).new(file.size))

    return verdict(file, done, digest)
