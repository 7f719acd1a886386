"""An object store's reads over HTTP, written once for every store (S3, Cloud Storage, Azure, the Hub): a range of one
version streamed into a sink, resumed after a cut from the bytes it holds, every answer checked to carry exactly the
bytes asked for before one is written, the lane's request sent without waiting. A store holds an `ObjectReads` and
supplies what only it knows (`ObjectApi`: how to ask, how to read an answer); its source is an `ObjectStorage`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol
from urllib.parse import urljoin, urlsplit

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.sources.http.getter import HttpGetter, HttpRequestInFlight, Request
from initializers.sources.http.http1 import ProtocolError, Response
from initializers.store import answers
from initializers.store.contract import MAX_REQUESTS, Advice, Storage
from initializers.store.lane import LaneReads
from initializers.store.sink import Sink

MAX_REDIRECTS = 10
#: The statuses whose Location a store's `judge` follows (`redirect_of`).
REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class ObjectRead:
    """Bytes [offset, offset + length) of `name` at `version` (None: any), listed at `size` bytes (None: unknown);
    `where` and `verb` name it and its reading in messages (`cannot open ...`). `piece`: answers of at most that many
    bytes, ending at its multiples, each checked whole through `checked(sink, length, where)` (Azure's range MD5)."""

    name: str
    version: str | None
    offset: int
    length: int
    size: int | None
    where: str
    verb: str = "read"
    piece: int | None = None
    checked: Callable[[Sink, int, str], Sink] | None = None

    @property
    def whole(self) -> bool:
        """The range is the whole object: asked for without a Range, from its first byte."""
        return self.offset == 0 and self.length == self.size


@dataclass
class Answer:
    """One answer asked for: bytes `start` to `end` (by Range when `ranged`), its body written into `sink`."""

    start: int
    end: int
    ranged: bool
    sink: Sink

    @property
    def length(self) -> int:
        return self.end + 1 - self.start


def redirect_of(read: ObjectRead, sent: Request, response: Response) -> str | None:
    """The URL a redirect answer to `sent` leads `read` to, made absolute; None when `response` is no redirect. A
    Location that is no URL, or of another scheme than http:// and https://, fails the read naming it."""
    location = response.header("location")
    if response.status not in REDIRECTS or not location:
        return None
    try:
        url = urljoin(sent.url, location)
        scheme = urlsplit(url).scheme.lower()
    except ValueError:  # an unclosed IPv6 bracket
        raise FetchError(
            f"{read.where}: {sent.netloc} redirected to {answers.shown(location)}, which is no URL"
        ) from None
    if scheme not in ("http", "https"):
        raise FetchError(
            f"{read.where}: {sent.netloc} redirected to a {scheme}:// URL; only http:// and https:// redirects are "
            "followed"
        )
    return url


class ObjectApi(Protocol):
    """What a store supplies the template: how to ask, and how to read what is answered."""

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """The GET for `answer`'s bytes of `read`'s version: by Range when `answer.ranged`, the version pinned."""

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> Request | None:
        """Read the head of the answer to `sent` before its body: raise what a failure means, refuse another version
        than pinned, tell `answer.sink` the checksum the answer vouches for. A redirect the store follows returns the
        request to send instead; None: the body is read, once the template has checked its range."""


class ObjectReads:
    """Ranged reads of a store's objects through `http`, as `api` asks and judges; thread-safe. `starts_over`: a
    resume of a whole object answered with all of it (a server that ignores Range, as olah) starts it over."""

    def __init__(self, http: HttpGetter, api: ObjectApi, starts_over: bool = False) -> None:
        self._http = http
        self._api = api
        self._starts_over = starts_over

    def advice(self, read_of: Callable[[RemoteFile, int, int], ObjectRead] | None = None) -> Advice:
        """What a store reading through the template advises the engine: a `Storage`'s small-file requests, the
        throttling and round trips its requests share (its listings' too), and the lane, given its reads' `read_of`."""
        http = self._http
        lane = None
        if read_of is not None:
            lane = LaneReads(lambda file, sink: self.begin(read_of(file, 0, file.size), sink), http.timeout)
        return Advice(max_requests=MAX_REQUESTS, throttle=http.throttle, round_trips=http.round_trips, lane=lane)

    def interrupt(self) -> None:
        self._http.interrupt()

    def close(self) -> None:
        self._http.close()

    def get(self, read: ObjectRead, sink: Sink) -> None:
        """`read`'s bytes into `sink`, answer after answer, resuming from the bytes it holds under the retry policy."""
        while True:
            self._http.retrying(read.verb, read.where, partial(self._get_once, read, sink))
            if sink.written >= read.length:
                return

    def begin(self, read: ObjectRead, sink: Sink) -> HttpRequestInFlight:
        """Send the request for `read` (a small object, whole) on a connection of the lane's and return it in flight
        (`HttpGetter.begin`): a failure raises from its `advance`, as `get` would raise it on its first attempt."""
        answer = self._answer(read, sink)
        sent = self._api.request(read, answer)
        accept = partial(self._accept, read, answer, sent)
        return self._http.begin(sent, accept, answer.sink, answer.length, read.where)

    def head(self, read: ObjectRead, answer: Answer) -> Response:
        """The store's answer for `answer`, redirects followed and its head judged, its body still to read."""
        sent = self._api.request(read, answer)
        for _ in range(MAX_REDIRECTS + 1):
            response = self._http.send(sent)
            redirect = self._api.judge(read, answer, sent, response)
            if redirect is None:
                return response
            response.read_all()  # keeps the connection usable
            sent = redirect
        raise FetchError(f"{read.where}: more than {MAX_REDIRECTS} redirects")

    def _get_once(self, read: ObjectRead, sink: Sink) -> None:
        """One answer of `read`, from the bytes `sink` holds on."""
        answer = self._answer(read, sink)
        response = self.head(read, answer)
        self._check_range(read, answer, response)
        self._http.stream_body(response, answer.sink, answer.length, read.where)
        if read.offset + sink.written <= answer.end:
            raise ProtocolError(f"the body ended {answer.end + 1 - read.offset - sink.written} bytes early")

    def _answer(self, read: ObjectRead, sink: Sink) -> Answer:
        """The next answer of `read` after what `sink` holds: the rest, or one piece. Bytes ending off a multiple of
        `piece` came from a piece cut short, never checked: the range starts over (`Sink.rewind`)."""
        piece = read.piece if read.length else None
        if piece and sink.written and (read.offset + sink.written) % piece:
            sink.rewind()
        start, end = read.offset + sink.written, read.offset + read.length - 1
        if piece:
            end = min(end, start - start % piece + piece - 1)
        if read.checked:
            sink = read.checked(sink, end + 1 - start, read.where)
        return Answer(start, end, piece is not None or not (read.whole and start == 0), sink)

    def _accept(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> None:
        """Judge the head of a lane's answer; the lane follows no redirect (a store that redirects offers none)."""
        if self._api.judge(read, answer, sent, response) is not None:
            raise FetchError(f"{read.where}: {sent.netloc} redirected a request of the lane, which follows none")
        self._check_range(read, answer, response)

    def _check_range(self, read: ObjectRead, answer: Answer, response: Response) -> None:
        """Refuse an answer that is not the bytes asked for, before any is written: a range's must say it carries
        exactly bytes `start`-`end` (a 200 that does is unambiguous too: rclone's S3 server answers so), a whole
        object's no other size than listed. A resume answered whole starts over where the store allows it."""
        content_range = response.header("content-range") or ""
        if self._starts_over and answer.ranged and read.whole and response.status == 200 and not content_range:
            answer.sink.rewind()
            answer.start, answer.ranged = 0, False
        start, end, length = answer.start, answer.end, response.length
        if answer.ranged and (
            not content_range.startswith(f"bytes {start}-{end}/") or length not in (None, end + 1 - start)
        ):
            raise FetchError(
                f"{read.where}: asked for bytes {start}-{end}, the server answered {response.status} "
                f"{content_range or 'without Content-Range'}{'' if length is None else f' ({length} bytes)'}"
            )
        if not answer.ranged and length is not None and length != read.size:
            raise FetchError(
                f"{read.where}: the listing said {read.size} bytes, the server sends {length}; the object changed, "
                "run again"
            )


class ObjectStorage(Storage):
    """A `Storage` whose files are read through the template, as `objects` are, each by `read_of(file, offset,
    length)`; in the lane too, unless `lane` is False (a store whose answers redirect: the lane follows none)."""

    def __init__(
        self, objects: ObjectReads, read_of: Callable[[RemoteFile, int, int], ObjectRead], lane: bool = True
    ) -> None:
        self._objects = objects
        self._read_of = read_of
        self._lane = lane

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        self._objects.get(self._read_of(file, offset, length), sink)

    def advice(self) -> Advice:
        return self._objects.advice(self._read_of if self._lane else None)

    def interrupt(self) -> None:
        self._objects.interrupt()

    def close(self) -> None:
        self._objects.close()


def xml_field(body: str, name: str) -> str | None:
    """The text of the first `<name>` element of an XML error answer (S3's and Azure's Code, Message ...)."""
    match = re.search(rf"<{name}>(.*?)</{name}>", body, re.S)
    return match.group(1).strip() if match else None


class Discard:
    """A sink that keeps nothing but the count: for a request whose answer matters, not its bytes."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: memoryview) -> None:
        self.written += len(data)

    def expect(self, checksum: Checksum) -> None:
        """Nothing is kept to check."""

    def rewind(self) -> None:
        self.written = 0
