"""What to fetch: the source's listing, filtered by ignore patterns and checked for safety, before any byte moves."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from initializers.checksums import Checksum
from initializers.errors import FetchError
from initializers.patterns import IgnorePatterns

#: The folder under OUTPUT_PATH that holds temporaries, the journal and the manifest; no source may write there.
STATE_DIR = ".initializer"


@dataclass(frozen=True)
class RemoteFile:
    """One file a source offers, at a path relative to the source root."""

    path: str
    size: int
    version: str  # changes whenever the content changes (an ETag, a blob id)
    locator: str  # the source's own address for it (an S3 key, a repo path)
    checksum: Checksum | None = None  # a digest the source vouches for, verified after the download
    #: False for a file the source produces rather than copies (a rewritten Parquet part): `size` is then an
    #: estimate for progress and free space, and the size actually written is what gets recorded.
    exact_size: bool = True

    def matches(self, size: int, version: str) -> bool:
        """True when a file recorded with this size and version is the one the source offers now."""
        return version == self.version and (size == self.size or not self.exact_size)


def safe_relative_path(name: str) -> str:
    """Normalise a source name into a path that stays inside OUTPUT_PATH, or refuse it.

    Empty and `.` segments are collapsed (S3 allows `a//b`); `..`, absolute names, NUL bytes and the
    state folder are refused, because writing them would escape or corrupt the destination.
    """
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
    return "/".join(segments)


def build_plan(files: Iterable[RemoteFile], ignore: IgnorePatterns, source: str) -> list[RemoteFile]:
    """Filter by ignore patterns, normalise and check every path, refuse collisions, refuse an empty result."""
    planned: dict[str, RemoteFile] = {}
    listed = 0
    for file in files:
        listed += 1
        if ignore.ignores(file.path):
            continue
        path = safe_relative_path(file.path)
        if path in planned:
            raise FetchError(
                f"source files {planned[path].locator!r} and {file.locator!r} both map to {path!r}; refusing to "
                "let one silently overwrite the other"
            )
        planned[path] = dataclasses.replace(file, path=path)
    _refuse_file_folder_clashes(planned)
    if not planned:
        if listed:
            raise FetchError(
                f"nothing to download from {source}: all {listed} files are excluded by IGNORE_PATTERNS "
                f"{','.join(ignore.patterns)!r}"
            )
        raise FetchError(f"nothing to download: {source} has no files")
    return sorted(planned.values(), key=lambda f: f.path)


def _refuse_file_folder_clashes(planned: dict[str, RemoteFile]) -> None:
    """`a` and `a/b` cannot both exist on a filesystem: say so instead of failing halfway."""
    for path in planned:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in planned:
                raise FetchError(
                    f"source files {planned[parent].locator!r} and {planned[path].locator!r} clash: "
                    f"{parent!r} would have to be both a file and a folder"
                )
