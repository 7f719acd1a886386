"""The gs:// source: a bucket's objects under a prefix (`bucket`), each verified by its CRC32C (every object has one;
ranges' CRCs combine; google-crc32c costs a fifteenth of MD5's CPU: bench/results.md), else its MD5."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile, base64_digest
from initializers.config.contract import Config
from initializers.sources.gcs.access import GcsAccess, access_from
from initializers.sources.gcs.bucket import GcsBucket
from initializers.sources.gcs.crc32c import CRC32C, CRC32C_KIND
from initializers.sources.gcs.location import GcsLocation
from initializers.sources.http.objects import ObjectStorage
from initializers.sources.http.pages import PageChain
from initializers.store import answers
from initializers.store.hashers import MD5, kinds


class GcsSource(ObjectStorage):
    """A bucket's objects under a prefix (or one object), each read at the generation listed."""

    checksum_kinds = kinds(MD5, CRC32C_KIND)

    def __init__(self, location: GcsLocation, config: Config, access: GcsAccess) -> None:
        self.location = location
        self._bucket = GcsBucket(location.bucket, access, config.read_timeout)
        super().__init__(self._bucket.objects, self._bucket.read_of)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> GcsSource:
        return cls(GcsLocation.parse(uri), config, access_from(config))

    def describe(self) -> dict[str, Any]:
        return {"uri": str(self.location), "endpoint": self._bucket.server}

    def list_files(self) -> Iterator[RemoteFile]:
        prefix = self.location.folder_prefix
        found = False
        for file in self._listing(prefix):
            found = found or not file.locator.endswith("/")  # a folder's placeholder is no object the URI names
            yield file
        name = self.location.name
        if not found and name and not name.endswith("/"):  # the URI may name one object rather than a folder
            path = name.rsplit("/", 1)[-1]
            with answers.read_from(self._bucket.server, f"reading the metadata of {self._bucket.uri_of(name)}"):
                item = self._bucket.metadata(name)
                one = None if item is None else _remote_file(_named(answers.record(item, "the answer"), name), path)
            if one is not None:
                yield one

    def _listing(self, prefix: str) -> Iterator[RemoteFile]:
        """Every object under `prefix`, page by page as Cloud Storage documents them; a listing going nowhere fails."""
        listing = f"listing {self._bucket.uri_of(prefix)}"
        chain = PageChain()
        chain.token_name = "nextPageToken"
        token: str | None = None
        while True:
            with answers.read_from(self._bucket.server, listing):
                page = answers.record(self._bucket.listing_page(prefix, token), "a page")
                files = []
                for item in answers.records(page.get("items"), "a page's items"):
                    item = answers.record(item, "an item of a page")
                    name = answers.text(item.get("name"), "an item's name")
                    files.append(_remote_file(item, answers.under(prefix, name)))
                token = answers.token(page.get("nextPageToken"), "a page's nextPageToken")
            try:
                chain.follow_entries(tuple(file.locator for file in files), token)
            except ValueError as exc:
                raise FetchError(f"{listing} at {self._bucket.server} goes nowhere: {exc}") from None
            yield from files
            if not token:
                return


def _named(item: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """An object's metadata, when it is `name`'s."""
    if answers.text(item.get("name"), "its name") != name:
        raise answers.Malformed(f"it describes {answers.shown(item['name'])}, not {name!r}")
    return item


def _remote_file(item: Mapping[str, Any], path: str) -> RemoteFile:
    """A listed object (its name read already) versioned by its generation; Malformed naming it if the answer is off."""
    name = item["name"]
    size = answers.size(item.get("size"), f"the size of {name!r}")
    generation = answers.digits(item.get("generation"), f"the generation of {name!r}")
    return RemoteFile(path, size, generation, name, _checksum(item, name))


def _checksum(item: Mapping[str, Any], name: str) -> Checksum:
    """The object's CRC32C, else its MD5 (a composite object has no MD5; every object has a CRC32C)."""
    for field, algorithm, length in (("crc32c", CRC32C, 4), ("md5Hash", "md5", 16)):
        value = item.get(field)
        if value:
            digest = base64_digest(value, length)
            if digest is None:
                raise answers.Malformed(f"the {field} of {name!r}, {answers.shown(value)}, is not a {algorithm} digest")
            return Checksum(algorithm, digest.hex())
    raise answers.Malformed(f"it gives {name!r} neither a CRC32C nor an MD5 to verify the object by")
