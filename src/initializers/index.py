"""The run's plan on disk: every planned file once, and what earlier runs finished, so memory stays flat.

A bucket may hold millions of objects; holding each as a Python object costs kilobytes. This keeps them in
SQLite (the standard library's) under `.initializer/`, where a path lookup is an index probe: collisions and
file/folder clashes are refused as files are listed, a file finished by an earlier run is recognised, and
the manifest is written from it in path order at the end.
"""

from __future__ import annotations

import hashlib
import heapq
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from initializers.checksums import Checksum
from initializers.errors import FetchError
from initializers.plan import RemoteFile
from initializers.state import DoneFile

_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA temp_store = FILE;
CREATE TABLE finished (path TEXT PRIMARY KEY, size INTEGER, version TEXT, mtime_ns INTEGER, in_manifest INTEGER)
    WITHOUT ROWID;
CREATE TABLE planned (path TEXT PRIMARY KEY, locator TEXT, size INTEGER, version TEXT, algorithm TEXT,
    hexdigest TEXT, exact_size INTEGER, shard INTEGER) WITHOUT ROWID;
"""
_BATCH_ROWS = 10_000


class PlanIndex:
    """One run's index, rebuilt from scratch each run (it is a cache of the manifest, the journal and the listing).

    Used by one thread at a time: the listing thread while files are listed, then the main thread.
    """

    def __init__(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")  # one transaction for the run: nothing here needs to survive a crash
        self.path = path

    def close(self) -> None:
        self._db.close()
        self.path.unlink(missing_ok=True)

    # -- what earlier runs finished ---------------------------------------------------------------------

    def add_finished(self, files: Iterable[DoneFile], in_manifest: bool) -> None:
        """Record finished files; a later record of a path replaces an earlier one (the journal wins), and keeps
        the manifest's claim only when it records the file exactly as the manifest does."""
        self._db.executemany(
            "INSERT INTO finished VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET in_manifest = "
            "(excluded.in_manifest OR (in_manifest AND size = excluded.size AND version = excluded.version AND "
            "mtime_ns = excluded.mtime_ns)), size = excluded.size, version = excluded.version, "
            "mtime_ns = excluded.mtime_ns",
            ((d.path, d.size, d.version, d.mtime_ns, in_manifest) for d in files),
        )

    def finished_as(self, file: RemoteFile) -> tuple[DoneFile, bool] | None:
        """The record of a finished file at this path and whether the manifest holds it, if its size and version
        are what the source offers now."""
        row = self._db.execute("SELECT * FROM finished WHERE path = ?", (file.path,)).fetchone()
        if row is None or not file.matches(row[1], row[2]):
            return None
        return DoneFile(*row[:4]), bool(row[4])

    # -- the plan -----------------------------------------------------------------------------------------

    def plan(self, file: RemoteFile) -> None:
        """Add a file to the plan, or refuse it when its path is taken, or clashes with a file or a folder."""
        try:
            self._db.execute(
                "INSERT INTO planned VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                (
                    file.path,
                    file.locator,
                    file.size,
                    file.version,
                    file.checksum and file.checksum.algorithm,
                    file.checksum and file.checksum.hexdigest,
                    file.exact_size,
                ),
            )
        except sqlite3.IntegrityError:
            raise FetchError(
                f"source files {self._locator(file.path)!r} and {file.locator!r} both map to {file.path!r}; refusing "
                "to let one silently overwrite the other"
            ) from None
        parts = file.path.split("/")
        parents = ["/".join(parts[:depth]) for depth in range(1, len(parts))]
        # Planned files under this file's path as a folder ('/' sorts just before '0'), or a planned file at one of
        # this file's folders: one statement, each half on its own index search (SQLite scans the whole table for
        # `path IN () OR ...`, and for an empty `IN ()`).
        at_parents = f" UNION ALL SELECT path, locator FROM planned WHERE path IN ({','.join('?' * len(parents))})"
        clash = self._db.execute(
            f"SELECT path, locator FROM planned WHERE path > ? AND path < ?{at_parents if parents else ''} LIMIT 1",
            (file.path + "/", file.path + "0", *parents),
        ).fetchone()
        if clash is not None:
            folder = min(clash[0], file.path, key=len)
            raise FetchError(
                f"source files {clash[1]!r} and {file.locator!r} clash: {folder!r} would have to be both a file and "
                "a folder"
            )

    def planned(self) -> Iterator[tuple[RemoteFile, DoneFile | None]]:
        """Every planned file in path order, with its record in `finished` (None if it has none)."""
        rows = self._db.execute(
            "SELECT p.*, f.size, f.mtime_ns FROM planned p LEFT JOIN finished f ON f.path = p.path ORDER BY p.path"
        )
        for *planned, done_size, mtime_ns in rows:
            file = _remote_file(*planned)
            yield file, None if done_size is None else DoneFile(file.path, done_size, file.version, mtime_ns)

    # -- a plan split over several initializers -------------------------------------------------------------

    def assign_shards(self, count: int) -> None:
        """Split the plan into `count` shares balanced by bytes: largest file first, each to the share with the
        fewest bytes so far (ties: the lower number); the same plan always splits the same way."""
        loads = [(0, shard) for shard in range(count)]
        batch: list[tuple[int, str]] = []
        # The ORDER BY sorts into a temporary b-tree before the first row comes, so updating as rows come is safe.
        for path, size in self._db.execute("SELECT path, size FROM planned ORDER BY size DESC, path"):
            load, shard = heapq.heappop(loads)
            heapq.heappush(loads, (load + size, shard))
            batch.append((shard, path))
            if len(batch) == _BATCH_ROWS:
                self._db.executemany("UPDATE planned SET shard = ? WHERE path = ?", batch)
                batch.clear()
        self._db.executemany("UPDATE planned SET shard = ? WHERE path = ?", batch)

    def share(self, shard: int) -> Iterator[RemoteFile]:
        """The planned files of one share, in path order."""
        for row in self._db.execute("SELECT * FROM planned WHERE shard = ? ORDER BY path", (shard,)):
            yield _remote_file(*row)

    def shares(self, count: int) -> list[tuple[int, int]]:
        """(files, bytes) of each of the `count` shares, by share number."""
        found = {shard: (files, int(size)) for shard, files, size in
                 self._db.execute("SELECT shard, count(*), total(size) FROM planned GROUP BY shard")}  # fmt: skip
        return [found.get(shard, (0, 0)) for shard in range(count)]

    def add_finished_in(self, shard: int, files: Iterable[DoneFile]) -> None:
        """Record the finished files another share's journal claims, for the paths that belong to that share."""
        self._db.executemany(
            "INSERT OR REPLACE INTO finished SELECT ?, ?, ?, ?, 0 WHERE EXISTS "
            "(SELECT 1 FROM planned WHERE path = ? AND shard = ?)",
            ((d.path, d.size, d.version, d.mtime_ns, d.path, shard) for d in files),
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

    def _locator(self, path: str) -> str:
        return self._db.execute("SELECT locator FROM planned WHERE path = ?", (path,)).fetchone()[0]


def _remote_file(
    path: str, locator: str, size: int, version: str, algorithm: str | None, hexdigest: str, exact: int, _shard: int
) -> RemoteFile:
    """A row of `planned` as the file it plans."""
    return RemoteFile(path, size, version, locator, Checksum(algorithm, hexdigest) if algorithm else None, bool(exact))
