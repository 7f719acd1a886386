"""Requests to one container of Azure Blob Storage (List Blobs pages, ranged blob GETs) on our HTTP/1.1 connections,
authorized as `AzureAccess` says, and what Azure's answers mean. A blob's read (`ObjectReads`) is pinned to its listed
ETag with If-Match: a blob replaced meanwhile answers 412, and the run fails saying it changed rather than land a mix of
two versions. A whole answer's Content-MD5 is no evidence of the blob: Azure (and Azurite) may compute it from the bytes
held now, vouching for a corrupted copy too; only the MD5 recorded when the blob was written, which the listing shows,
is (`source`); a blob without one: `range_md5`.
"""

from __future__ import annotations

import ssl
from dataclasses import replace
from functools import partial
from urllib.parse import quote

from initializers.common.errors import FetchError, changed_during_download
from initializers.common.remote_file import RemoteFile
from initializers.sources.azure.access import AzureAccess
from initializers.sources.azure.location import AzureLocation
from initializers.sources.azure.range_md5 import ASK_FOR_MD5, MAX_HASHED_RANGE, HashedAnswer
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, ObjectRead, ObjectReads, xml_field

#: The version of Azure's API every request asks for (bearer tokens need 2017-11-09 or later).
API_VERSION = "2024-11-04"
#: Where our connections take their CA certificates from (the system's, unless it names others), for messages.
TRUST = "SSL_CERT_FILE"
_MAX_LISTING_PAGE = 32 << 20  # 5000 entries of a 1 KiB name and their properties
#: Azure's codes for answers worth another attempt, beside the transient statuses; ServerBusy is throttling.
_TRANSIENT_CODES = frozenset({"ServerBusy", "OperationTimedOut", "InternalError"})


class ContainerRequests:
    """Authorized GETs of one container's listing pages and blobs. Thread-safe."""

    def __init__(self, location: AzureLocation, access: AzureAccess, timeout: float) -> None:
        self.location = location
        self._access = access
        self._base = f"{access.endpoint.path}/{quote(location.container, safe='$')}"
        self._http = HttpGetter(ssl.create_default_context, timeout, TRUST)
        self.objects = ObjectReads(self._http, self)

    def list_page(self, params: dict[str, str], where: str) -> bytes:
        """The body of one List Blobs page; `where` names what is listed, for messages."""
        return self._http.retrying("list", where, partial(self._list_page_once, params, where))

    def read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """`file`'s bytes [offset, offset + length) pinned to its ETag; without an MD5 of its own, in hashed answers."""
        where = self.location.uri_of(file.locator)
        read = ObjectRead(file.locator, file.version, offset, length, file.size, where)
        return read if file.checksum is not None else replace(read, piece=MAX_HASHED_RANGE, checked=HashedAnswer)

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """An authorized GET of `answer`'s bytes, If-Match its ETag; hashed, it asks for their MD5 (`HashedAnswer`)."""
        headers = {"if-match": f'"{read.version}"'} if read.version else {}
        if read.piece:
            headers[ASK_FOR_MD5] = "true"
        if answer.ranged:
            headers["x-ms-range"] = f"bytes={answer.start}-{answer.end}"
        return self._authorized(f"{self._base}/{quote(read.name, safe='/~')}", {}, headers)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> None:
        """Azure's failure raised as what it means, a changed blob refused, the MD5 of a hashed answer taken."""
        if response.status not in (200, 206):
            raise self._failure("read", read.where, response)
        etag = (response.header("etag") or "").strip('"')
        if etag and read.version and etag != read.version:
            raise FetchError(changed_during_download(read.where, f"ETag {read.version} became {etag}"))
        if isinstance(answer.sink, HashedAnswer):
            answer.sink.head(response, answer.start)

    def _list_page_once(self, params: dict[str, str], where: str) -> bytes:
        response = self._http.send(self._authorized(self._base, params, {}))
        if response.status != 200:
            raise self._failure("list", where, response)
        return response.read_all(_MAX_LISTING_PAGE)

    def _authorized(self, path: str, params: dict[str, str], headers: dict[str, str]) -> Request:
        """The GET of `path` with `params` and `headers`, its credential's proof added to the headers (or the query)."""
        endpoint = self._access.endpoint
        headers.update({"host": endpoint.netloc, "x-ms-version": API_VERSION, "user-agent": USER_AGENT})
        query = "&".join(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in params.items())
        sas = self._access.credential.authorize(path, params, headers)
        query = "&".join(part for part in (query, sas) if part)
        return Request(endpoint.scheme, endpoint.netloc, f"{path}?{query}" if query else path, headers)

    def _failure(self, verb: str, where: str, response: Response) -> Exception:
        """Azure's error (x-ms-error-code, else the body's Code; its Message) as what to do: transient ones retried."""
        body = response.read_all().decode(errors="replace")
        code = response.header("x-ms-error-code") or xml_field(body, "Code") or response.reason
        message = (xml_field(body, "Message") or "").split("\n", 1)[0]  # then RequestId and Time
        status = response.status
        if status in RETRIABLE_STATUS or code in _TRANSIENT_CODES:
            return retriable(status, code, response.header("retry-after"), throttled=code == "ServerBusy")
        check = self._access.credential.check
        return FetchError(azure_error(verb, where, self.location.uri_of(""), (status, code, message), check))


def azure_error(verb: str, where: str, container: str, answer: tuple[int, str, str], check: str) -> str:
    """A failed request's message from Azure's answer (status, code, message); `check`: what to check when refused."""
    status, code, message = answer
    if code == "ContainerNotFound":
        return f"the container {container} does not exist ({code})"
    if status == 412:
        return changed_during_download(where, f"its ETag no longer matches: {status} {code}")
    if status == 416:
        return changed_during_download(where, f"it is shorter than listed: {status} {code}")
    if code == "BlobArchived":
        return (
            f"{where} is in the Archive tier ({code}): rehydrate it to another tier first, or exclude it with "
            "IGNORE_PATTERNS"
        )
    if code == "BlobNotFound":
        return f"{where} disappeared after it was listed ({code})"
    if status in (401, 403) or code in ("PublicAccessNotPermitted", "ResourceNotFound"):
        return f"Azure denied {verb}ing {where}: {status} {code}; check {check}"
    return f"Azure answered {status} {code} for {where}" + (f": {message}" if message else "")
