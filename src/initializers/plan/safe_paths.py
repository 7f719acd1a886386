"""What to fetch: the selected files of the source's listing, checked for safety, file by file."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.destination.state import STATE_DIR
from initializers.plan.selection import names_a_folder

#: The longest file or folder name ext4, XFS and NFS take (S3 keys may have longer segments).
MAX_NAME_BYTES = 255
#: The most files planned together: about a listing page.
PLAN_BATCH = 1024


def safe_relative_path(name: str) -> str:
    """Normalise a source name into a path that stays inside OUTPUT_PATH, or refuse it. Empty and `.` segments are
    collapsed (S3 allows `a//b`); `..`, absolute names, NUL bytes and the state folder are refused, because writing them
    would escape or corrupt the destination; so are names no filesystem takes (a segment over 255 bytes, a lone UTF-16
    surrogate, which a JSON listing's `\\ud800` decodes to and no UTF-8 encodes), which would otherwise fail mid-run."""
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise FetchError(f"refusing source file {name!r}: its name holds a lone surrogate, no character") from None
    if _is_plain(name) and size <= MAX_NAME_BYTES:
        return name  # already normal, and too short for any segment to be too long: the common case, not split
    if "\0" in name:
        raise FetchError(f"refusing source file {name!r}: its name contains a NUL byte")
    if name.startswith("/"):
        raise FetchError(f"refusing source file {name!r}: an absolute path would escape OUTPUT_PATH")
    segments = [s for s in name.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise FetchError(f"refusing source file {name!r}: a '..' segment would escape OUTPUT_PATH")
    if not segments:
        raise FetchError(f"refusing source file {name!r}: it names no file")
    if segments[0] == STATE_DIR:
        raise FetchError(f"refusing source file {name!r}: {STATE_DIR}/ is reserved for the initializer's state")
    if any(len(segment.encode()) > MAX_NAME_BYTES for segment in segments):
        raise FetchError(
            f"refusing source file {name!r}: a path segment is longer than {MAX_NAME_BYTES} bytes, more than "
            "filesystems allow in a name"
        )
    return "/".join(segments)


def _is_plain(name: str) -> bool:
    """Not absolute, no NUL, and no empty, `.`, `..` or dot-led segment (so not the state folder either)."""
    return (
        bool(name)
        and name[0] not in "./"
        and "/." not in name
        and "//" not in name
        and not name.endswith("/")
        and "\0" not in name
    )


def plan_files(
    files: Iterable[RemoteFile], source: str, register: Callable[[list[RemoteFile]], None]
) -> Generator[list[RemoteFile], None, Any]:
    """Normalise and check the selected files' paths, `register` them (`PlanIndex.plan`) and refuse an empty listing; as
    a stream of batches, each registered before it is passed on. Batches grow from one file, so the first is ready at
    once, to PLAN_BATCH, over which the checks are shared. Returns what `files` returned (the selection's findings)."""
    planned = 0
    selected = KeepsReturnValue(files)

    def checked() -> Iterator[RemoteFile]:
        for file in selected:
            if names_a_folder(file.path):  # the selection skipped the empty ones
                raise FetchError(
                    f"refusing source file {file.locator!r}: it holds {file.size} bytes but is named like a folder, so "
                    "no file can take its name; rename it, or exclude it with IGNORE_PATTERNS"
                )
            if (path := safe_relative_path(file.path)) != file.path:  # most names are already normal: no copy
                file = file._replace(path=path)
            yield file

    for batch in _growing_batches(checked(), PLAN_BATCH):
        register(batch)
        planned += len(batch)
        yield batch
    if not planned:
        raise FetchError(f"nothing to download: {source} has no files")
    return selected.value


def _growing_batches(items: Iterable[RemoteFile], most: int) -> Iterator[list[RemoteFile]]:
    """Lists of 1, 2, 4, ... up to `most` items, as they come."""
    batch: list[RemoteFile] = []
    size = 1
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch, size = [], min(2 * size, most)
    if batch:
        yield batch
