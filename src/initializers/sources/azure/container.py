"""Requests to one container of Azure Blob Storage: List Blobs pages and ranged blob GETs, authorized as the run's
`AzureAccess` says, on our HTTP/1.1 connections (`HttpGetter`: retries under the one policy, the fleet's throttling),
and what Azure's answers mean.

A blob's read is pinned to its listed ETag with If-Match: a blob replaced meanwhile answers 412, and the run fails
saying it changed rather than land a mix of two versions. A read resumes after a transient failure from the bytes
already written. The Content-MD5 of a whole blob's answer is never taken as evidence of the blob: Azure (and Azurite)
may compute it from the bytes held now, so it vouches for a corrupted copy too; only the MD5 recorded when the blob
was written, which the listing shows, is (`source`). A blob without one is read in answers of 4 MiB at most, each
checked against the MD5 Azure computes of it as it sends it (`range_md5`): that vouches for the way, not the copy.
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
from initializers.sources.azure.range_md5 import ASK_FOR_MD5, MAX_HASHED_RANGE, HashedAnswer
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
    """One read: the blob's name and ETag (pinned with If-Match; None: whatever version is there), and the byte range
    wanted; `whole`: the range is the whole blob, asked for without a range; `hashed`: asked for in answers of
    `MAX_HASHED_RANGE` bytes at most, each checked against the MD5 Azure sends of it (`range_md5`)."""

    name: str
    etag: str | None
    offset: int
    length: int
    whole: bool
    hashed: bool = False


@dataclass(frozen=True)
class _Answer:
    """The GET for the next answer of a read: its path and headers, and the bytes it asks for, `start` to `end`;
    `ranged`: asked for by range; `hashed`: the sink it streams into, checking Azure's MD5 of it."""

    path: str
    headers: dict[str, str]
    start: int
    end: int
    ranged: bool
    hashed: HashedAnswer | None


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
        """Stream the range into `sink`, answer after answer, resuming after transient failures from the bytes
        already written."""
        where = self.location.uri_of(read.name)
        while True:
            self._http.retrying("read", where, partial(self._get_once, read, sink))
            if sink.written >= read.length:
                return

    def begin(self, read: BlobRead, sink: Sink) -> HttpRequestInFlight:
        """Send the request for `read` on a connection of the lane's and return it in flight (`HttpGetter.begin`):
        a small blob's, whole in one answer (the lane asks again for what one did not bring)."""
        answer = self._next_answer(read, sink)
        endpoint = self._access.endpoint
        return self._http.begin(
            endpoint.scheme,
            endpoint.netloc,
            self._authorized(answer.path, {}, answer.headers),
            answer.headers,
            partial(self._accept, read, answer),
            answer.hashed or sink,
            answer.end + 1 - answer.start,
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
        """One answer of `read`, from the bytes `sink` holds on."""
        answer = self._next_answer(read, sink)
        response = self._send(answer.path, {}, answer.headers)
        self._accept(read, answer, response)
        wanted = answer.end + 1 - answer.start
        self._http.stream_body(response, answer.hashed or sink, wanted, self.location.uri_of(read.name))
        if read.offset + sink.written <= answer.end:
            raise ProtocolError(f"the body ended {answer.end + 1 - read.offset - sink.written} bytes early")

    def _next_answer(self, read: BlobRead, sink: Sink) -> _Answer:
        """The GET for the rest of `read` after what `sink` holds, or as much of it as one hashed answer carries.
        Hashed answers end every `MAX_HASHED_RANGE` bytes of the blob (`range_md5.checked_of` relies on it): bytes
        that end elsewhere came from an answer cut short, never checked against its MD5, and the range starts over
        (`Sink.rewind`)."""
        hashed = read.hashed and read.length > 0
        if hashed and sink.written and (read.offset + sink.written) % MAX_HASHED_RANGE:
            sink.rewind()
        start, end = read.offset + sink.written, read.offset + read.length - 1
        headers = {"if-match": f'"{read.etag}"'} if read.etag else {}
        if hashed:
            end = min(end, start - start % MAX_HASHED_RANGE + MAX_HASHED_RANGE - 1)
            headers[ASK_FOR_MD5] = "true"
        ranged = hashed or not (read.whole and start == 0)
        if ranged:
            headers["x-ms-range"] = f"bytes={start}-{end}"
        where = self.location.uri_of(read.name)
        checked = HashedAnswer(sink, end + 1 - start, where) if hashed else None
        return _Answer(f"{self._base}/{quote(read.name, safe='/~')}", headers, start, end, ranged, checked)

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

    def _accept(self, read: BlobRead, answer: _Answer, response: Response) -> None:
        """Judge a blob's answer before its body: Azure's failure raised as what it means, a changed blob or a wrong
        range refused (`check_range_answer`, as every store's), the MD5 of a hashed one taken."""
        where = self.location.uri_of(read.name)
        if response.status not in (200, 206):
            raise self._failure("read", where, response)
        etag = (response.header("etag") or "").strip('"')
        if etag and read.etag and etag != read.etag:
            raise FetchError(changed_during_download(where, f"ETag {read.etag} became {etag}"))
        check_range_answer(response, where, answer.start, answer.end, read.length, answer.ranged)
        if answer.hashed is not None:
            answer.hashed.head(response, answer.start)

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
