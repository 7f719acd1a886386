"""A completed `cache://` materialisation read back as one table, for serving row ranges of it.

Table order is the manifest's shard order (`shard-0`, `shard-1`, ...), then each shard's parts, then each part's rows:
the order the cache source laid the Iceberg table out in. Rows [a, b) are read a row group and a batch at a time from
the parts that hold them, so memory stays near one batch per reader whatever the table's size. Opening reads the
manifest and the parts' footers only, and refuses a folder that is not the complete materialisation of a whole table.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from initializers.common.errors import FetchError
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.destination.state import MANIFEST, STATE_DIR

if TYPE_CHECKING:  # pyarrow loads when a table is opened
    import pyarrow as pa

#: Buffered reads of column chunks, as the cache source reads data files: no whole column chunk in memory at once.
_READ_BUFFER = 1 << 20
_PART_NAME = re.compile(r"part-(\d+)\.parquet")


@dataclass(frozen=True)
class _Part:
    """One Parquet file of a shard: where it starts in table order and the rows of each of its row groups."""

    path: Path
    first_row: int
    row_groups: tuple[int, ...]

    @property
    def rows(self) -> int:
        return sum(self.row_groups)


class MaterialisedTable:
    """The rows of every shard of a completed materialisation, in table order, in one Arrow schema."""

    def __init__(self, folder: Path, schema: pa.Schema, parts: list[_Part], source: dict[str, Any]) -> None:
        self.folder = folder
        self.schema = schema
        self.source = source
        self._parts = parts
        self._starts = [part.first_row for part in parts]
        self.rows = sum(part.rows for part in parts)

    @property
    def files(self) -> int:
        return len(self._parts)

    @classmethod
    def open(cls, folder: Path) -> MaterialisedTable:
        """The table in `folder`; a FetchError naming the folder unless its manifest claims a complete
        materialisation of a whole table and every part it lists is there, as large and as long as it says."""
        path = folder / STATE_DIR / MANIFEST
        head = manifest.read_head(path)
        if head is None:
            raise FetchError(
                f"{folder} holds no complete materialisation: no readable manifest at {path} (run the dataset "
                "initializer with a cache:// STORAGE_URI into it first, and wait for it to finish)"
            )
        source = head.get("source") or {}
        if not str(source.get("uri", "")).startswith("cache://") or not isinstance(source.get("shards"), list):
            raise FetchError(f"{folder} holds {source.get('uri')!r}, not a cache:// materialisation (Parquet shards)")
        if source.get("shard") is not None:
            raise FetchError(
                f"{folder} holds only shard-{source['shard']} of the table (a SHARD_INDEX materialisation); serving "
                "needs every shard: materialise the whole table without SHARD_INDEX"
            )
        listed = _parts_by_shard(manifest.read_files(path))
        parts: list[_Part] = []
        schemas: set[pa.Schema] = set()
        laid = 0  # rows in table order so far
        try:
            for shard in source["shards"]:
                files = listed.get(shard["path"], [])
                if len(files) != shard["files"]:
                    raise FetchError(
                        f"{folder}: the manifest lists {len(files)} parts of {shard['path']}, not {shard['files']}"
                    )
                shard_start = laid
                for done in files:
                    part, schema = _read_part(folder, done, laid)
                    parts.append(part)
                    schemas.add(schema)
                    laid += part.rows
                if laid - shard_start != shard["rows"]:
                    raise FetchError(
                        f"{folder / shard['path']} holds {laid - shard_start} rows, the manifest says {shard['rows']}"
                    )
        except (KeyError, TypeError):
            raise FetchError(f"{folder}: its manifest's shards are not as the cache source writes them") from None
        if len(schemas) != 1:
            raise FetchError(f"{folder}: its parts have {len(schemas)} schemas, not one: {schemas}")
        table = cls(folder, schemas.pop(), parts, source)
        if table.rows != source.get("rows"):
            raise FetchError(f"{folder} holds {table.rows} rows in all, the manifest says {source.get('rows')}")
        return table

    def batches(self, start: int, stop: int) -> Iterator[pa.RecordBatch]:
        """Rows [start, stop) in table order, a batch at a time, each in `schema`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        first = max(bisect.bisect_right(self._starts, start) - 1, 0)
        for part in self._parts[first:]:
            if part.first_row >= stop:
                return
            bounds = list(itertools.accumulate(part.row_groups, initial=part.first_row))  # the row groups' first rows
            selected = [index for index, end in enumerate(bounds[1:]) if end > start and bounds[index] < stop]
            if not selected:
                continue
            parquet = pq.ParquetFile(part.path, pre_buffer=False, buffer_size=_READ_BUFFER)
            try:
                position = bounds[selected[0]]
                for batch in parquet.iter_batches(row_groups=selected, use_threads=False):
                    low, high = max(start - position, 0), min(stop - position, batch.num_rows)
                    position += batch.num_rows
                    if low < high:
                        rows = batch.slice(low, high - low)
                        yield pa.RecordBatch.from_arrays(rows.columns, schema=self.schema)
                    if position >= stop:
                        return
            finally:
                parquet.close()


def _read_part(folder: Path, done: DoneFile, first_row: int) -> tuple[_Part, pa.Schema]:
    """A part from its footer, starting at table row `first_row`, and its schema; a FetchError unless it is there,
    as large as the manifest says, and readable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / done.path
    try:
        size = path.stat().st_size
        if size != done.size:
            raise FetchError(f"{path} has {size} bytes, the manifest says {done.size}: it changed since")
        footer = pq.read_metadata(path)
    except OSError as exc:
        raise FetchError(f"{path}: {exc.strerror or exc}; the materialisation is incomplete") from None
    except pa.ArrowException as exc:
        raise FetchError(f"{path} is not a readable Parquet file: {exc}") from None
    groups = tuple(footer.row_group(index).num_rows for index in range(footer.num_row_groups))
    return _Part(path, first_row, groups), footer.schema.to_arrow_schema().remove_metadata()


def _parts_by_shard(files: Iterator[DoneFile]) -> dict[str, list[DoneFile]]:
    """The manifest's parts grouped by shard folder, each group in part order (the manifest lists paths sorted as
    text, where part-100000 would come before part-99999)."""
    grouped: dict[str, list[tuple[int, DoneFile]]] = {}
    for done in files:
        folder, _, name = done.path.rpartition("/")
        if match := _PART_NAME.fullmatch(name):
            grouped.setdefault(folder, []).append((int(match.group(1)), done))
    return {folder: [done for _, done in sorted(entries)] for folder, entries in grouped.items()}
