"""The cache:// store's conformance fixture: an Iceberg table on SeaweedFS, behind a relay.

The cache source makes its files from an Iceberg table, so its "files" are rows `(path, data)`, one data file per
`put` file, and what landed is read back from the shards' rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from devkit.conformance import Store
from devkit.relay import CorruptFault, Relay
from devkit.seaweed import SeaweedFS
from initializers.sources.iceberg.source import IcebergSource


class CacheStore(Store):
    """An Iceberg table on SeaweedFS whose rows are `(path, data)`, one data file per file put; the program reads it
    through a relay in front of SeaweedFS and writes it as Parquet shards, read back as rows."""

    scheme = "cache"
    source = IcebergSource
    selection = False  # every row is sharded
    nodes = 2

    findings: ClassVar[dict[str, str]] = {
        "flip": (
            "a byte flipped in the read a part is copied from lands at the part's final path (its first byte, "
            "Parquet's PAR1 magic, wrong), exit 0, manifest written: Iceberg records no checksum of a data file and "
            "the copy is checked by its size only, a limit docs/configuration.md (VERIFY) admits, though "
            "docs/cache.md says the part is the data file copied byte for byte"
        ),
    }

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        seaweed = request.getfixturevalue("seaweed")
        with Relay(seaweed.endpoint) as relay:
            yield cls(seaweed, request.getfixturevalue("bucket"), relay, tmp)

    def __init__(self, seaweed: SeaweedFS, bucket: str, relay: Relay, root: Path) -> None:
        from devkit.iceberg import sql_catalog

        self.seaweed, self.bucket, self.relay = seaweed, bucket, relay
        self.catalog = sql_catalog(root, f"s3://{bucket}/warehouse", seaweed)
        self.table: Any = None
        self.data_files: dict[str, str] = {}  # path -> the key of the data file holding its row

    def _rows(self, files: dict[str, bytes]) -> Any:
        import pyarrow as pa

        schema = pa.schema([pa.field("path", pa.string()), pa.field("data", pa.binary())])
        return pa.table({"path": list(files), "data": list(files.values())}, schema=schema)

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            if self.table is None:
                self.table = self.catalog.create_table("shop.files", self._rows({}).schema)
            self._append(path, data)

    def _append(self, path: str, data: bytes) -> None:
        before = self._data_file_paths()
        self.table.append(self._rows({path: data}))
        (added,) = self._data_file_paths() - before
        self.data_files[path] = added.split("://", 1)[1].split("/", 1)[1]  # the key in the bucket

    def _data_file_paths(self) -> set[str]:
        return {task.file.file_path for task in self.table.scan().plan_files()}

    def change(self, path: str, data: bytes) -> None:
        from pyiceberg.expressions import EqualTo

        self.table.delete(EqualTo("path", path))
        self._append(path, data)

    def env(self, output: Path) -> dict[str, str]:
        return {**self.seaweed.env(), "ENDPOINT": self.relay.endpoint, "STORAGE_URI": "cache://shop/files",
                "METADATA_LOC": self.table.metadata_location, "NUM_DATA_NODES": str(self.nodes),
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{self.bucket}/{self.data_files[path]}"

    def listing(self) -> tuple[Relay, str]:
        """The table's metadata file (METADATA_LOC), the first thing its listing reads."""
        return self.relay, ".metadata.json"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def flip_fault(self, match: str) -> CorruptFault:
        """Aimed at the read from the data file's first byte: pyarrow reads the footer first (a flip there falls in
        bytes it then reads again), then the whole file from its start, which a part copies byte for byte."""
        return CorruptFault(match=match, times=1, range_from=0)

    def landed(self, output: Path) -> dict[str, bytes]:
        """The rows of every shard, as path -> data; a path in two rows is a failure of the suite's, not a dict's."""
        import pyarrow.parquet as pq

        found: dict[str, bytes] = {}
        for part in sorted(output.glob("shard-*/*.parquet")):
            for row in pq.read_table(part).to_pylist():
                assert row["path"] not in found, f"{row['path']!r} is in two rows"
                found[row["path"]] = row["data"]
        return found

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """The secret key of the S3 store the table is on (its signatures are not secrets)."""
        env = self.env(output)
        return env, [env["SECRET_ACCESS_KEY"]]


FIXTURES = {CacheStore.scheme: CacheStore}
