"""The run's plan on disk: every planned file once, and what earlier runs finished, so memory stays flat.

A bucket may hold millions of objects, each costing kilobytes as a Python object. SQLite (the standard library's) keeps
them under `.initializer/`, where a path lookup is an index probe: collisions and file/folder clashes are refused as
listed, a file finished by an earlier run is recognised, and the manifest is written from it in path order.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import sqlite3
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, NoReturn

from initializers.common.errors import FetchError, disk_error
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.done import DoneFile
from initializers.plan.safe_paths import PLAN_BATCH

_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA temp_store = FILE;
CREATE TABLE finished (path TEXT PRIMARY KEY, size INTEGER, version TEXT, mtime_ns INTEGER, algorithm TEXT,
    hexdigest TEXT, in_manifest INTEGER) WITHOUT ROWID;
CREATE TABLE planned (path TEXT PRIMARY KEY, locator TEXT, size INTEGER, version TEXT, algorithm TEXT,
    hexdigest TEXT, exact_size INTEGER, share INTEGER) WITHOUT ROWID;
CREATE TABLE folders (path TEXT PRIMARY KEY) WITHOUT ROWID;
"""
#: The most values bound to one statement (SQLite builds before 3.32 take at most 999).
_MOST_VALUES = 500
#: The index's file in a run's state folder (`.initializer/`; a dry run's in a temporary folder elsewhere).
FILE_NAME = "index.sqlite"


class PlanIndex:
    """One run's index, rebuilt from scratch each run (it is a cache of the manifest, the journal and the listing); used
    by one thread at a time: the listing thread while files are listed, then the main thread."""

    def __init__(self, path: Path) -> None:
        """The file is made here first, so a volume that refuses it says why (a full disk, naming the file), where
        SQLite would say only that it is "unable to open database file"."""
        path.unlink(missing_ok=True)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
        except OSError as exc:
            raise disk_error(exc, str(path)) from None
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")  # one transaction for the run: nothing here needs to survive a crash
        self.path = path

    def close(self, in_use: bool = False) -> None:
        """Remove the index's file, whatever the run's end: it is rebuilt each run, so a run that landed nothing
        leaves nothing of it. `in_use`: a thread still plans into it (a listing that does not answer, left to the
        process's exit, which comes next), so its connection stays open, on a file no longer under any name."""
        self.path.unlink(missing_ok=True)
        if not in_use:
            self._db.close()

    # -- what earlier runs finished ---------------------------------------------------------------------

    def add_finished(self, files: Iterable[DoneFile], in_manifest: bool) -> None:
        """Record finished files; a later record of a path replaces an earlier one (the journal wins), and keeps
        the manifest's claim only when it records the file exactly as the manifest does."""
        self._db.executemany(  # the records are bound as they are (tuples): no row is rebuilt on the way
            f"INSERT INTO finished VALUES (?, ?, ?, ?, ?, ?, {int(in_manifest)}) ON CONFLICT (path) DO UPDATE SET "
            "in_manifest = (excluded.in_manifest OR (in_manifest AND size = excluded.size AND "
            "version = excluded.version AND mtime_ns = excluded.mtime_ns)), size = excluded.size, "
            "version = excluded.version, mtime_ns = excluded.mtime_ns, algorithm = excluded.algorithm, "
            "hexdigest = excluded.hexdigest",
            files,
        )

    def finished_among(self, files: list[RemoteFile]) -> dict[str, tuple[DoneFile, bool]]:
        """Finished records of these files at the size and version offered now, and whether the manifest holds each."""
        offered = {file.path: file for file in files}
        found = {}
        for *record, in_manifest in self._at_paths("SELECT * FROM finished", list(offered)):
            done = DoneFile(*record)
            if offered[done.path].matches(done.size, done.version):
                found[done.path] = (done, bool(in_manifest))
        return found

    # -- the plan -----------------------------------------------------------------------------------------

    def plan(self, files: list[RemoteFile]) -> None:
        """Add files to the plan, or refuse them when a path is taken twice, or would be both a file and a folder.
        Checked a batch at a time, in a few statements, since a listing may hold millions of files: the folders of every
        planned file are kept too, so a clash is a path found among the other kind."""
        try:
            self._db.executemany(
                "INSERT INTO planned VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                (
                    (
                        file.path,
                        file.locator,
                        file.size,
                        file.version,
                        file.checksum and file.checksum.algorithm,
                        file.checksum and file.checksum.hexdigest,
                        file.exact_size,
                    )
                    for file in files
                ),
            )
        except sqlite3.IntegrityError:
            self._refuse_collision(files)
        folders = _folders(files)
        self._db.executemany("INSERT OR IGNORE INTO folders VALUES (?)", ((folder,) for folder in folders))
        self._refuse_clash(self._at_paths("SELECT path FROM folders", [file.path for file in files]))
        self._refuse_clash(self._at_paths("SELECT path FROM planned", folders))

    def _at_paths(self, select: str, paths: list[str]) -> Generator[tuple[Any, ...], None, None]:
        """The rows `select` finds at `paths`, asked `_MOST_VALUES` paths at a time."""
        for start in range(0, len(paths), _MOST_VALUES):
            chunk = paths[start : start + _MOST_VALUES]
            yield from self._db.execute(f"{select} WHERE path IN ({','.join('?' * len(chunk))})", chunk)

    def _refuse_collision(self, files: list[RemoteFile]) -> NoReturn:
        for file in files:
            taken = self._db.execute("SELECT locator FROM planned WHERE path = ?", (file.path,)).fetchone()
            if taken is not None and taken[0] != file.locator:
                raise FetchError(
                    f"source files {taken[0]!r} and {file.locator!r} both map to {file.path!r}; refusing to let one "
                    "silently overwrite the other"
                )
        raise FetchError(f"the source lists a file twice, among {files[0].locator!r} .. {files[-1].locator!r}")

    def _refuse_clash(self, found: Generator[tuple[Any, ...], None, None]) -> None:
        """Refuse the plan if `found` names a path that is both a planned file and the folder of another (its query
        closed at once: left open, it would outlive the database)."""
        with closing(found):
            row = next(found, None)
        if row is None:
            return
        (folder,) = row
        (file,) = self._db.execute("SELECT locator FROM planned WHERE path = ?", (folder,)).fetchone()
        (inside,) = self._db.execute(
            "SELECT locator FROM planned WHERE path > ? AND path < ? LIMIT 1", (folder + "/", folder + "0")
        ).fetchone()  # '/' sorts just before '0': the paths under the folder
        raise FetchError(
            f"source files {file!r} and {inside!r} clash: {folder!r} would have to be both a file and a folder"
        )

    def planned(self) -> Iterator[tuple[RemoteFile, DoneFile | None]]:
        """Every planned file in path order, with its record in `finished` (None if it has none)."""
        rows = self._db.execute(
            "SELECT p.*, f.size, f.mtime_ns, f.algorithm, f.hexdigest FROM planned p LEFT JOIN finished f "
            "ON f.path = p.path ORDER BY p.path"
        )
        for *planned, done_size, mtime_ns, algorithm, hexdigest in rows:
            file = _remote_file(*planned)
            done = DoneFile(file.path, done_size, file.version, mtime_ns, algorithm, hexdigest)
            yield file, None if done_size is None else done

    # -- a plan split over several initializers -------------------------------------------------------------

    def assign_shares(self, count: int) -> None:
        """Split the plan into `count` shares balanced by bytes: largest file first, each to the share with the
        fewest bytes so far (ties: the lower number); the same plan always splits the same way."""
        loads = [(0, share) for share in range(count)]

        def assigned() -> Iterator[tuple[int, str]]:
            # The ORDER BY sorts into a temporary b-tree before the first row comes, so updating as rows come is safe.
            for path, size in self._db.execute("SELECT path, size FROM planned ORDER BY size DESC, path"):
                load, share = heapq.heappop(loads)
                heapq.heappush(loads, (load + size, share))
                yield share, path

        self._db.executemany("UPDATE planned SET share = ? WHERE path = ?", assigned())

    def share(self, number: int) -> Iterator[list[RemoteFile]]:
        """The planned files of share `number`, in path order, in batches."""
        rows = self._db.execute("SELECT * FROM planned WHERE share = ? ORDER BY path", (number,))
        while batch := rows.fetchmany(PLAN_BATCH):
            yield [_remote_file(*row) for row in batch]

    def shares(self, count: int) -> list[tuple[int, int]]:
        """(files, bytes) of each of the `count` shares, by share number."""
        found = {share: (files, int(size)) for share, files, size in
                 self._db.execute("SELECT share, count(*), total(size) FROM planned GROUP BY share")}  # fmt: skip
        return [found.get(share, (0, 0)) for share in range(count)]

    def add_finished_in(self, share: int, files: Iterable[DoneFile]) -> None:
        """Record the finished files another share's journal claims, for the paths that belong to that share."""
        self._db.executemany(
            "INSERT OR REPLACE INTO finished SELECT ?, ?, ?, ?, ?, ?, 0 WHERE EXISTS "
            "(SELECT 1 FROM planned WHERE path = ? AND share = ?)",
            ((*d, d.path, share) for d in files),
        )

    def fingerprint(self) -> str:
        """A digest of the whole plan (paths, sizes, versions): shares listed from one source version agree on it."""
        digest = hashlib.sha256()
        for path, size, version in self._db.execute("SELECT path, size, version FROM planned ORDER BY path"):
            digest.update(f"{path}\0{size}\0{version}\n".encode())
        return digest.hexdigest()

    def planned_paths(self, under_glob: str) -> set[str]:
        """Planned paths matching a glob (SQLite's GLOB), for the few files of the folders a source owns."""
        return {path for (path,) in self._db.execute("SELECT path FROM planned WHERE path GLOB ?", (under_glob,))}

    def totals(self) -> tuple[int, int]:
        """Planned files, and their bytes as finished (a produced file's size is known once it is written)."""
        count, size = self._db.execute(
            "SELECT count(*), total(f.size) FROM planned p LEFT JOIN finished f ON f.path = p.path"
        ).fetchone()
        return count, int(size)


def _folders(files: list[RemoteFile]) -> list[str]:
    """Every folder the files are in, at every depth, once (files listed together mostly share theirs)."""
    folders: set[str] = set()
    for file in files:
        folder = file.path.rpartition("/")[0]
        while folder and folder not in folders:
            folders.add(folder)
            folder = folder.rpartition("/")[0]
    return sorted(folders)


def _remote_file(
    path: str, locator: str, size: int, version: str, algorithm: str | None, hexdigest: str, exact: int, _share: int
) -> RemoteFile:
    """A row of `planned` as the file it plans."""
    return RemoteFile(path, size, version, locator, Checksum(algorithm, hexdigest) if algorithm else None, bool(exact))
