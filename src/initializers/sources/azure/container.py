"""Requests to one container of Azure Blob Storage: List Blobs pages and ranged blob GETs, authorized as the run's
`AzureAccess` says, on our HTTP/1.1 connections (`HttpGetter`: retries under the one policy, the fleet's throttling),
and what Azure's answers mean.

A blob's read is pinned to its listed ETag with If-Match: a blob replaced meanwhile answers 412, and the run fails
saying it changed rather than land a mix of two versions. A read resumes after a transient failure from the bytes
already written. The Content-MD5 of an answer is never taken as evidence: Azure (and Azurite) may compute it from
the bytes held now, so it vouches for a corrupted copy too; only the MD5 recorded when the blob was written, which
the listing shows, is (`source`).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from functools import partial
from urllib.parse import quote

from initializers.common.errors import FetchError, changed_during_download
from initializers.sources.azure.access import AzureAccess
from initializers.sources.azure.location import AzureLocation
from initializers.sources.http.getter import (
    RETRIABLE_STATUS,
    USER_AGENT,
    HttpGetter,
    HttpRequestInFlight,
    check_range_answer,
    retriable,
)
from initializers.sources.http.http1 import ProtocolError, Response
from initializers.store.sink import Sink

#: The version of Azure's API every request asks for (bearer tokens need 2017-11-09 or later).
API_VERSION = "2024-11-04"
#: Where our connections take their CA certificates from (the system's, unless it names others), as a certificate
#: failure names it.
TRUST = "SSL_CERT_FILE"
_MAX_LISTING_PAGE = 32 << 20  # 5000 entries of a 1 KiB name and their properties
#: Azure's codes for answers worth another attempt, beside the transient statuses; ServerBusy is throttling.
_TRANSIENT_CODES = frozenset({"ServerBusy", "OperationTimedOut", "InternalError"})


@dataclass(frozen=True)
class BlobRead:
    """One GET: the blob's name and ETag (pinned with If-Match; None: whatever version is there), and the byte range
    wanted; `whole`: the range is the whole blob, asked for without a range."""

    name: str
    etag: str | None
    offset: int
    length: int
    whole: bool


class ContainerRequests:
    """Authorized GETs of one container's listing pages and blobs. Thread-safe."""

    def __init__(self, location: AzureLocation, access: AzureAccess, timeout: float) -> None:
        self.location = location
        self._access = access
        self._base = f"{access.endpoint.path}/{quote(location.container, safe='$')}"
        self._http = HttpGetter(ssl.create_default_context, timeout, TRUST)
        #: The hold its requests share while Azure throttles them, and the round trips they show.
        self.throttle = self._http.throttle
        self.round_trips = self._http.round_trips

    def list_page(self, params: dict[str, str], where: str) -> bytes:
        """The body of one List Blobs page; `where` names what is listed, for messages."""
        return self._http.retrying("list", where, partial(self._list_page_once, params, where))

    def get(self, read: BlobRead, sink: Sink) -> None:
        """Stream the range into `sink`, resuming after transient failures from the bytes already written."""
        self._http.retrying("read", self.location.uri_of(read.name), partial(self._get_once, read, sink))

    def begin(self, read: BlobRead, sink: Sink) -> HttpRequestInFlight:
        """Send the request on a connection of the lane's and return it in flight (`HttpGetter.begin`)."""
        path, headers, start, end, ranged = self._blob_request(read, sink)
        endpoint = self._access.endpoint
        return self._http.begin(
            endpoint.scheme,
            endpoint.netloc,
            self._authorized(path, {}, headers),
            headers,
            partial(self._accept, read, start=start, end=end, ranged=ranged),
            sink,
            end + 1 - start,
            self.location.uri_of(read.name),
        )

    def interrupt(self) -> None:
        self._http.interrupt()

    def close(self) -> None:
        self._http.close()

    def _list_page_once(self, params: dict[str, str], where: str) -> bytes:
        response = self._send(self._base, params, {})
        if response.status != 200:
            raise self._failure("list", where, response)
        return response.read_all(_MAX_LISTING_PAGE)

    def _get_once(self, read: BlobRead, sink: Sink) -> None:
        path, headers, start, end, ranged = self._blob_request(read, sink)
        response = self._send(path, {}, headers)
        self._accept(read, response, start=start, end=end, ranged=ranged)
        self._http.stream_body(response, sink, end + 1 - start, self.location.uri_of(read.name))
        if read.offset + sink.written <= end:
            raise ProtocolError(f"the body ended {end + 1 - read.offset - sink.written} bytes early")

    def _blob_request(self, read: BlobRead, sink: Sink) -> tuple[str, dict[str, str], int, int, bool]:
        """The path and headers of a GET for the rest of `read` (after what `sink` holds), and that rest: its first
        and last byte, and whether it is asked for as a range."""
        start, end = read.offset + sink.written, read.offset + read.length - 1
        headers = {"if-match": f'"{read.etag}"'} if read.etag else {}
        ranged = not (read.whole and start == 0)
        if ranged:
            headers["x-ms-range"] = f"bytes={start}-{end}"
        return f"{self._base}/{quote(read.name, safe='/~')}", headers, start, end, ranged

    def _send(self, path: str, params: dict[str, str], headers: dict[str, str]) -> Response:
        """Authorize and send `GET path?params` on this thread's connection."""
        target = self._authorized(path, params, headers)
        return self._http.send(self._access.endpoint.scheme, self._access.endpoint.netloc, target, headers)

    def _authorized(self, path: str, params: dict[str, str], headers: dict[str, str]) -> str:
        """The request's target, its credential's proof added to `headers` (or its query)."""
        headers.update({"host": self._access.endpoint.netloc, "x-ms-version": API_VERSION, "user-agent": USER_AGENT})
        query = "&".join(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in params.items())
        sas = self._access.credential.authorize(path, params, headers)
        query = "&".join(part for part in (query, sas) if part)
        return f"{path}?{query}" if query else path

    def _accept(self, read: BlobRead, response: Response, *, start: int, end: int, ranged: bool) -> None:
        """Judge a blob's answer before its body: Azure's failure raised as what it means, a changed blob or a wrong
        range refused (`check_range_answer`, as every store's)."""
        where = self.location.uri_of(read.name)
        if response.status not in (200, 206):
            raise self._failure("read", where, response)
        etag = (response.header("etag") or "").strip('"')
        if etag and read.etag and etag != read.etag:
            raise FetchError(changed_during_download(where, f"ETag {read.etag} became {etag}"))
        check_range_answer(response, where, start, end, read.length, ranged)

    def _failure(self, verb: str, where: str, response: Response) -> Exception:
        """Azure's error answer (x-ms-error-code, else the body's Code, and its Message) as the exception that says
        what to do: a transient one retried, the rest final."""
        body = response.read_all().decode(errors="replace")
        code = response.header("x-ms-error-code") or _xml_field(body, "Code") or response.reason
        message = (_xml_field(body, "Message") or "").split("\n", 1)[0]  # then RequestId and Time
        status = response.status
        if status in RETRIABLE_STATUS or code in _TRANSIENT_CODES:
            return retriable(status, code, response.header("retry-after"), throttled=code == "ServerBusy")
        check = self._access.credential.check
        return FetchError(azure_error(verb, where, self.location.uri_of(""), (status, code, message), check))


def azure_error(verb: str, where: str, container: str, answer: tuple[int, str, str], check: str) -> str:
    """The message for a failed request, from Azure's answer (status, code, message); `container` names the
    container, `check` what to check when the credential is refused."""
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


def _xml_field(body: str, name: str) -> str | None:
    match = re.search(rf"<{name}>(.*?)</{name}>", body, re.S)
    return match.group(1).strip() if match else None
