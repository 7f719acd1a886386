"""pyiceberg's FileIO for the cache source: the contract's settings, the bucket's own region, current credentials.
pyarrow's S3 filesystem takes one region and static keys. Credentials come from `sources.aws`, as for the S3 source, and
a FileIO is made anew whenever botocore has refreshed them, so an assumed role's or web identity's session never expires
under a long materialisation. pyarrow does not follow S3's region redirects: a metadata file on S3 is first read with
the S3 source's signed GETs (`S3Getter`), which learn the bucket's own region from S3's redirect for pyarrow, and report
a missing or forbidden metadata file in S3's words.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from initializers.cache.arrow_memory import prefer_system_allocator
from initializers.config.contract import Config
from initializers.sources.aws.access import AwsAccess
from initializers.sources.aws.bucket import S3Getter
from initializers.sources.aws.sigv4 import SigningCredentials
from initializers.sources.http.http1 import CONNECT_TIMEOUT, Proxy, proxy_url

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

S3_SCHEMES = ("s3", "s3a")
_VERSION_HINT = "metadata/version-hint.text"  # what pyiceberg reads when METADATA_LOC names the table's folder


class TableStorage:
    """Where the table's files are read from, and with which settings; `file_io()` is safe to call from threads."""

    def __init__(self, config: Config, metadata_location: str, access: AwsAccess) -> None:
        prefer_system_allocator()  # for pyarrow's reads of the table: read when it first allocates, which is later
        self._settings = {
            "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
            "s3.connect-timeout": str(CONNECT_TIMEOUT),
            "s3.request-timeout": str(config.read_timeout),
        }
        if access.endpoint:
            self._settings["s3.endpoint"] = access.endpoint
        if access.anonymous:
            self._settings["s3.anonymous"] = "true"
        parts = urlsplit(metadata_location)
        self._metadata: tuple[S3Getter, str] | None = None
        # A region is always set: without one, pyarrow asks AWS for the bucket's region, a stall of seconds per file.
        self.region = access.region
        self._credentials: Callable[[], SigningCredentials | None]
        if parts.scheme.lower() in S3_SCHEMES:
            getter = S3Getter(parts.netloc, access, config.read_timeout)
            self._metadata = getter, _first_file(parts.path.lstrip("/"))
            self._credentials = getter.credentials
        elif access.static or access.role:  # local metadata: data files may still be on S3
            self._credentials = access.credentials()
        else:  # a local table, or pyarrow's own credential chain for S3 data files
            self._credentials = lambda: None
        storage = urlsplit(access.endpoint or f"https://s3.{self.region}.amazonaws.com")
        # pyarrow reads no proxy variable itself
        if (access.endpoint or self._metadata) and (named := proxy_url(storage.scheme, storage.netloc)):
            Proxy.parse(*named)  # only http:// proxies, as for S3 and the Hub: anything else is exit 2
            self._settings["s3.proxy-uri"] = named[0]
        self._lock = threading.Lock()
        self._io: FileIO | None = None
        self._io_credentials: SigningCredentials | None = None

    @property
    def endpoint(self) -> str | None:
        return self._settings.get("s3.endpoint")

    def locate(self) -> bool:
        """Find the metadata bucket's region (S3 redirects a wrong one) before pyarrow opens it; False if not on S3."""
        if self._metadata is None:
            return False
        getter, key = self._metadata
        try:
            getter.locate(key)
            self.region = getter.region
        finally:
            getter.objects.close()
        return True

    def properties(self) -> dict[str, str]:
        """pyiceberg's FileIO properties as of now: the settings, the region, the current credentials."""
        return self._properties_with(self._credentials())

    def file_io(self) -> FileIO:
        """The FileIO to open the next file with: a new one when the credentials changed since the last."""
        from pyiceberg.io import load_file_io

        with self._lock:
            credentials = self._credentials()
            if self._io is None or credentials != self._io_credentials:
                self._io = load_file_io(self._properties_with(credentials))
                self._io_credentials = credentials
            return self._io

    def _properties_with(self, credentials: SigningCredentials | None) -> dict[str, str]:
        if credentials is None:
            return {**self._settings, "s3.region": self.region}
        keys = {"s3.access-key-id": credentials.access_key, "s3.secret-access-key": credentials.secret_key}
        if credentials.token:
            keys["s3.session-token"] = credentials.token
        return {**self._settings, "s3.region": self.region, **keys}


def _first_file(key: str) -> str:
    """The object pyiceberg reads first: the metadata file, or the version hint of a table's folder."""
    return key if key.endswith(".metadata.json") else f"{key.rstrip('/')}/{_VERSION_HINT}"
