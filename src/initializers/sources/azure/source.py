"""The az:// source: a container's blobs under a prefix (`container`), each verified by the Content-MD5 recorded at
write time; one without (committed from blocks), answer by answer (`range_md5`), recorded by size and ETag.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.config.contract import Config
from initializers.sources.azure.access import AzureAccess, access_from
from initializers.sources.azure.container import ContainerRequests
from initializers.sources.azure.listing import ListedBlob, ListPage, PageChain, page_query, parse_page
from initializers.sources.azure.location import AzureLocation
from initializers.sources.azure.range_md5 import checked_of
from initializers.sources.http.objects import ObjectStorage
from initializers.store.contract import Intervals
from initializers.store.hashers import MD5, kinds


class AzureSource(ObjectStorage):
    """A container's blobs under a prefix, or one blob, of the account the credentials (or the URL) name."""

    checksum_kinds = kinds(MD5)
    pins_versions = False  # a blob replaced during the run fails it (If-Match), never lands mixed

    def __init__(self, location: AzureLocation, config: Config, access: AzureAccess) -> None:
        self.location = location
        self._access = access
        self._requests = ContainerRequests(location, access, config.read_timeout)
        super().__init__(self._requests.objects, self._requests.read_of)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> AzureSource:
        location = AzureLocation.parse(uri)
        return cls(location, config, access_from(location, config))

    def describe(self) -> dict[str, Any]:
        return {"uri": str(self.location), "endpoint": str(self._access.endpoint), "account": self._access.account}

    def list_files(self) -> Iterator[RemoteFile]:
        prefix = self.location.folder_prefix
        found = False
        for blob in self._listing(prefix):
            found = found or not blob.name.endswith("/")  # a folder's placeholder is no blob the URI names
            yield self._remote_file(blob, blob.name[len(prefix) :])
        name = self.location.name
        if not found and name and not name.endswith("/"):  # the URI may name one blob rather than a folder
            for first in self._page(name, page_query(name, None, 1)).blobs:  # the name itself sorts first under it
                if first.name == name:
                    yield self._remote_file(first, name.rsplit("/", 1)[-1])

    def _listing(self, prefix: str) -> Iterator[ListedBlob]:
        """Every blob under `prefix`, page after page, but a Data Lake account's directories (empty blobs: no files)."""
        chain = PageChain()
        marker: str | None = None
        while True:
            page = self._page(prefix, page_query(prefix, marker), chain)
            yield from (blob for blob in page.blobs if not blob.directory)
            if page.next_marker is None:
                return
            marker = page.next_marker

    def _page(self, prefix: str, query: dict[str, str], chain: PageChain | None = None) -> ListPage:
        """The page `query` (a `page_query`) lists of the blobs under `prefix`; the next of `chain`'s, if given."""
        where = self.location.uri_of(prefix)
        answer = self._requests.list_page(query, where)  # its errors (a credential's settings refused) its own
        try:
            page = parse_page(answer, prefix)
            if chain is not None:
                chain.follow(page)
        except ValueError as exc:
            raise FetchError(f"listing {where} at {self._access.endpoint}: {exc}") from None
        return page

    def _remote_file(self, blob: ListedBlob, path: str) -> RemoteFile:
        """The file a blob is, with the MD5 Azure recorded for it, if any; refused when it must be rehydrated."""
        if blob.archived:
            raise FetchError(
                f"{self.location.uri_of(blob.name)} is in the Archive tier: rehydrate it to another tier "
                "first (Set Blob Tier), or exclude it with IGNORE_PATTERNS"
            )
        checksum = Checksum("md5", blob.md5) if blob.md5 else None
        return RemoteFile(path, blob.size, blob.etag, blob.name, checksum)

    def resumable(self, file: RemoteFile, kept: Intervals) -> Intervals:
        """All of it for a blob with its own MD5 (checked once whole); else what ends where a checked answer ended."""
        return kept if file.checksum is not None else checked_of(kept, file.size)
