"""The https:// source: one file (`location`), probed for its size, version and digest, then read whole or in
parallel ranges (`server`). Verified by the digest pinned in the URL, else the one the server vouches for
(`digests`), else by its size and ETag (or Last-Modified) alone, recorded as such and said once in the log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from initializers.common import logs
from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config
from initializers.sources.http.objects import ObjectStorage
from initializers.sources.web.location import WebLocation
from initializers.sources.web.options import WebOptions
from initializers.sources.web.server import Probed, WebServer
from initializers.store.contract import PART_SIZE, Intervals
from initializers.store.hashers import MD5, SHA256, HashKind, kinds

_log = logs.get_logger("initializers.web")
#: SHA-512, which a URL may pin and a server vouch with; no other store uses it.
SHA512 = HashKind("sha512", lambda _size: hashlib.sha512())
#: The version of a file whose server gives neither an ETag nor a Last-Modified, and whose digest nobody gives.
UNVERSIONED = "no ETag or Last-Modified"


class WebSource(ObjectStorage):
    """One file on a web server, read at the version its first answer showed."""

    checksum_kinds = kinds(SHA256, SHA512, MD5)
    pins_versions = False  # a file replaced during the run fails it (If-Match), never lands mixed

    def __init__(self, location: WebLocation, config: Config) -> None:
        self.location = location
        headers = config.options(WebOptions).http_headers or ()
        self._server = WebServer(location, headers, config.read_timeout)
        self._probed: Probed | None = None
        super().__init__(self._server.objects, self._server.read_of, lane=False)

    @classmethod
    def from_config(cls, uri: str, config: Config) -> WebSource:
        """The source `uri` names; its query, a presigned URL's signature perhaps, hidden from now on."""
        location = WebLocation.parse(uri)
        query = location.url.partition("?")[2]
        logs.hide(query)
        if location.plain:
            _log.warning("plain http", uri=location.shown, why="the file and any HTTP_HEADERS travel unencrypted")
        return cls(location, config)

    def describe(self) -> dict[str, Any]:
        return {"uri": str(self.location), "endpoint": self._server.server}

    def list_files(self) -> Iterator[RemoteFile]:
        probed = self._probed = self._server.probe()
        name = self.location.name or probed.filename
        if not name:
            raise FetchError(
                f"{self.location.shown}: its path ends in no file name and the server's answer gives none "
                "(Content-Disposition): name the file in the URL"
            )
        checksum = self.location.pinned or probed.checksum
        digest = f"{checksum.algorithm}:{checksum.hexdigest}" if checksum else None  # the content's own version
        version = probed.etag or probed.last_modified or digest or UNVERSIONED
        if checksum is None:
            _log.info("no digest", uri=self.location.shown, verified_by=f"size and {version}")
        yield RemoteFile(name, probed.size, version, self.location.shown, checksum)

    def part_size_for(self, file: RemoteFile) -> int | None:
        """Ranges where the server answers them; else one stream."""
        return PART_SIZE if self._probed is not None and self._probed.ranges else None

    def resumable(self, file: RemoteFile, kept: Intervals) -> Intervals:
        """What an earlier run kept, where ranges let this one read on from it; else nothing."""
        return kept if self._probed is not None and self._probed.ranges else ()
