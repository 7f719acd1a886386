"""The S3 source: our signed GETs list and fetch (`aws.bucket`); botocore resolves what is left open (`aws.access`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.lookahead import Lookahead
from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config
from initializers.sources.aws.access import AwsAccess, access_from
from initializers.sources.aws.bucket import CHECKSUM_KINDS, S3Getter
from initializers.sources.http.objects import ObjectStorage
from initializers.sources.s3.listing import (
    ListedObject,
    ListPage,
    PageChain,
    key_ranges,
    page_query,
    parse_page,
)
from initializers.sources.s3.location import S3Location

#: Key ranges listed at once, and how many objects they may list ahead of the reader, together.
PARALLEL_LISTINGS = 8
#: Pages listed as one chain before the rest is cut into ranges: as many as the ranges may list past their ends.
CHAINED_PAGES = PARALLEL_LISTINGS
LISTING_AHEAD = 2000


class S3Source(ObjectStorage):
    """A bucket's objects under a prefix, listed and read by signed GETs (`sources/aws/bucket.py`)."""

    checksum_kinds = CHECKSUM_KINDS

    def __init__(self, location: S3Location, config: Config, access: AwsAccess) -> None:
        self.location = location
        self._endpoint_url = access.endpoint
        self._getter = S3Getter(location.bucket, access, config.read_timeout)
        super().__init__(self._getter.objects, self._getter.read_of)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> S3Source:
        return cls(S3Location.parse(uri), config, access_from(config))

    def describe(self) -> dict[str, Any]:
        # The bucket's region: as configured, or where S3 redirected the first request.
        return {"uri": str(self.location), "endpoint": self._endpoint_url, "region": self._getter.region}

    def list_files(self) -> Iterator[RemoteFile]:
        prefix = self.location.folder_prefix
        found = False
        for listed in self._listing(prefix):
            found = found or not listed.key.endswith("/")  # a folder's marker is no object the URI names
            if listed.archived:
                raise FetchError(
                    f"{self._getter.uri_of(listed.key)} is in the {listed.storage_class} storage class and has no "
                    "restored copy: restore it first (S3 RestoreObject), or exclude it with IGNORE_PATTERNS"
                )
            yield RemoteFile(listed.key[len(prefix) :], listed.size, listed.etag, listed.key)
        key = self.location.key
        if not found and key and not key.endswith("/"):  # the URI may name one object rather than a folder
            # The key itself sorts first under its prefix.
            for first in self._page(key, page_query(key, None, max_keys=1)).objects:
                if first.key == key:
                    yield RemoteFile(key.rsplit("/", 1)[-1], first.size, first.etag, key)

    def _listing(self, prefix: str) -> Iterator[ListedObject]:
        """Every object under `prefix`. Pages are a round trip each, so a large listing goes faster in parallel; but
        cutting it costs a delimiter listing to find the folders to cut at, and each range lists up to a page past its
        end. So the first CHAINED_PAGES pages are chained, all a listing that size costs; only the rest is cut."""
        last: str | None = None
        for count, page in enumerate(self._pages(prefix), 1):
            yield from page.objects
            if page.next_token is None:
                return
            last = page.objects[-1].key if page.objects else last
            if count == CHAINED_PAGES:
                break
        yield from self._listing_in_ranges(prefix, last)

    def _listing_in_ranges(self, prefix: str, after: str | None) -> Iterator[ListedObject]:
        """The objects after `after`: those directly under `prefix` with its folders (a delimiter listing), the keys
        below in ranges cut at folders, all listed at once, a bounded number ahead of the reader (`LISTING_AHEAD`)."""
        folders: list[str] = []
        for page in self._pages(prefix, delimiter="/", start_after=after):
            yield from page.objects
            folders.extend(page.folders)
        if 0 < len(folders) < PARALLEL_LISTINGS:
            # Too few to cut evenly: cut at the folders one level down too, those a first page of each shows (a
            # folder of a million files must not be listed twice to find out it has no folders).
            pages = (self._page(folder, page_query(folder, None, delimiter="/")) for folder in folders)
            below = [sub for page in pages for sub in page.folders]
            folders = sorted({*folders, *below})
        inside_a_folder = after is not None and "/" in after[len(prefix) :]  # the rest of its folder comes first
        cuts = key_ranges(folders, PARALLEL_LISTINGS, after if inside_a_folder else None)
        listed = Lookahead([self._range(prefix, start, end) for start, end in cuts], LISTING_AHEAD, "s3-listing")
        try:
            yield from listed
        finally:
            listed.close()

    def _range(self, prefix: str, start: str, end: str | None) -> Iterator[ListedObject]:
        """The keys in [start, end) below a folder of `prefix` (those directly under it come with its folders)."""
        for page in self._pages(prefix, start_after=start):
            for listed in page.objects:
                if end is not None and listed.key >= end:
                    return
                if "/" in listed.key[len(prefix) :]:
                    yield listed

    def _pages(self, prefix: str, delimiter: str | None = None, start_after: str | None = None) -> Iterator[ListPage]:
        chain = PageChain()
        page = self._page(prefix, page_query(prefix, None, delimiter=delimiter, start_after=start_after), chain)
        yield page
        while page.next_token is not None:
            page = self._page(prefix, page_query(prefix, page.next_token, delimiter=delimiter), chain)
            yield page

    def _page(self, prefix: str, query: dict[str, str], chain: PageChain | None = None) -> ListPage:
        """The page `query` (a `page_query`) lists of the keys under `prefix`; the next of `chain`'s, if given."""
        where = self._getter.uri_of(prefix)
        try:
            page = parse_page(self._getter.get_listing_page(query, where), prefix)
            if chain is not None:
                chain.follow(page)
        except ValueError as exc:
            raise FetchError(f"listing {where} at {self._getter.server}: {exc}") from None
        return page
