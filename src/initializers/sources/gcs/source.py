"""The gs:// source: a bucket's objects under a prefix, listed through the JSON API and read in ranges pinned to the
generation listed, each verified against the CRC32C Cloud Storage holds for it (every object has one; its ranges'
CRCs combine, and google-crc32c takes a fifteenth of MD5's CPU here: bench/results.md), else its MD5."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import CRC32C, Checksum, RemoteFile
from initializers.config.contract import Config
from initializers.sources.gcs.access import GcsAccess, access_from
from initializers.sources.gcs.bucket import GcsBucket
from initializers.sources.gcs.location import GcsLocation
from initializers.store.contract import MAX_EMPTY_PAGES, Storage
from initializers.store.lane import LaneReads, RequestInFlight
from initializers.store.sink import Sink


class GcsSource(Storage):
    """A bucket's objects under a prefix (or one object), each read at the generation listed."""

    checksum_kinds = frozenset(("md5", CRC32C))

    def __init__(self, location: GcsLocation, config: Config, access: GcsAccess) -> None:
        self.location = location
        self._bucket = GcsBucket(location.bucket, access, config.read_timeout)
        self.throttle = self._bucket.throttle  # listing pages and object reads pause together
        self.round_trips = self._bucket.round_trips  # the listing's pages measure it before the first read
        self.lane_reads = LaneReads(self._begin_read, config.read_timeout)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> GcsSource:
        return cls(GcsLocation.parse(uri), config, access_from(config))

    def describe(self) -> dict[str, Any]:
        return {"uri": str(self.location), "endpoint": self._bucket.server}

    def list_files(self) -> Iterator[RemoteFile]:
        prefix = self.location.folder_prefix
        found = False
        for item in self._listing(prefix):
            name = item.get("name", "")
            if name.endswith("/"):  # a "folder" placeholder the console makes, not a file
                continue
            found = True
            yield _remote_file(item, name[len(prefix) :], self._bucket.uri_of(name))
        name = self.location.name
        if not found and name and not name.endswith("/"):  # the URI may name one object rather than a folder
            item = self._bucket.metadata(name)
            if item is not None:
                yield _remote_file(item, name.rsplit("/", 1)[-1], self._bucket.uri_of(name))

    def _listing(self, prefix: str) -> Iterator[dict[str, Any]]:
        """Every object under `prefix`, page after page; a listing whose pages go nowhere fails."""
        token: str | None = None
        empty, seen = 0, set[str]()
        while True:
            page = self._bucket.listing_page(prefix, token)
            items = page.get("items") or []
            if not isinstance(items, list):
                raise FetchError(f"listing {self._bucket.uri_of(prefix)}: a page's items are not a list")
            yield from items
            token = page.get("nextPageToken")
            if not token:
                return
            empty = 0 if items else empty + 1
            if empty >= MAX_EMPTY_PAGES or token in seen:
                raise FetchError(
                    f"listing {self._bucket.uri_of(prefix)} at {self._bucket.server} goes nowhere: "
                    + ("a page token came back" if token in seen else f"{empty} pages in a row without an object")
                )
            seen.add(token)

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        self._bucket.read(file.locator, file.version, offset, length, file.size, sink)

    def _begin_read(self, file: RemoteFile, sink: Sink) -> RequestInFlight:
        return self._bucket.begin(file.locator, file.version, file.size, sink)

    def interrupt(self) -> None:
        self._bucket.interrupt()

    def close(self) -> None:
        self._bucket.close()


def _remote_file(item: dict[str, Any], path: str, where: str) -> RemoteFile:
    """A listed object: its size, its generation as its version, and the checksum Cloud Storage holds for it (its MD5,
    else its CRC32C); a FetchError naming it when the listing says something else."""
    size, generation = item.get("size"), item.get("generation")
    if not isinstance(size, str) or not size.isdigit() or not isinstance(generation, str) or not generation.isdigit():
        raise FetchError(f"{where}: the listing gives no usable size and generation ({size!r}, {generation!r})")
    return RemoteFile(path, int(size), generation, item["name"], _checksum(item, where))


def _checksum(item: dict[str, Any], where: str) -> Checksum:
    """The object's CRC32C, else its MD5 (a composite object has no MD5; every object has a CRC32C)."""
    for field, algorithm, length in (("crc32c", CRC32C, 4), ("md5Hash", "md5", 16)):
        value = item.get(field)
        if value:
            try:
                digest = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                digest = b""
            if len(digest) != length:
                raise FetchError(f"{where}: the listing's {field} {value!r} is not a {algorithm} digest")
            return Checksum(algorithm, digest.hex())
    raise FetchError(f"{where}: the listing gives neither a CRC32C nor an MD5 to verify the object by")
