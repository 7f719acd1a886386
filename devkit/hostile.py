"""Loopback servers posing as the Hub and as S3, misbehaving as a test asks: for the hostile-server tests.

A `Poser` answers each request with the first of its routes whose pattern matches the request's target (path and
query) and that returns an `Answer` rather than None. An answer says its status, headers and body, and how the body
is framed: with a Content-Length, chunked, or ended by closing the connection; an iterable body is sent piece by
piece, `pause` seconds apart (a trickle), for as long as it lasts (`endless`) or the client stays. `HubPoser` and
`S3Poser` start out as a well-behaved model repo and bucket; a test puts the misbehaviour it is about in front
(`Poser.answer`). Every request is recorded, headers included, so a test can tell what was sent where.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from devkit.serving import QuietDisconnects, ServedInThread


class _Server(QuietDisconnects, ThreadingHTTPServer):
    """The poser's server: quiet when the program under test hangs up on it, as it does on a refused answer."""


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Iterable[bytes] = b""
    framing: Literal["length", "chunked", "close"] = "length"
    pause: float = 0.0  # seconds before each piece of an iterable body (an iterator is used up by one answer)


@dataclass(frozen=True)
class Seen:
    """A request as it reached the poser."""

    method: str
    target: str
    headers: dict[str, str]  # names in lower case

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.target).path)

    @property
    def query(self) -> dict[str, str]:
        return {name: values[0] for name, values in parse_qs(urlsplit(self.target).query).items()}


Route = Callable[[Seen], Answer | None]


def endless(piece: bytes = b"x" * 1024) -> Iterator[bytes]:
    """A body that never ends."""
    while True:
        yield piece


def json_answer(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode())


class Poser:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._routes: list[tuple[re.Pattern[str], Route]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._serving = ServedInThread(self._server, "poser")

    def __enter__(self) -> Poser:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._serving.stop()

    def answer(self, pattern: str, route: Route | Answer) -> None:
        """Answer requests whose target matches `pattern` (a regular expression, searched) before every earlier route;
        an `Answer` given as is answers each of them alike."""
        chosen: Route = route if callable(route) else lambda _seen: route
        with self._lock:
            self._routes.insert(0, (re.compile(pattern), chosen))

    def requests(self, pattern: str = "") -> list[Seen]:
        """The requests so far whose target matches `pattern`."""
        with self._lock:
            return [seen for seen in self.seen if re.search(pattern, seen.target)]

    def _respond(self, seen: Seen) -> Answer:
        with self._lock:
            self.seen.append(seen)
            routes = list(self._routes)
        for pattern, route in routes:
            if pattern.search(seen.target) and (answer := route(seen)) is not None:
                return answer
        return json_answer({"error": "not found"}, 404)


def _handler(poser: Poser) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen = Seen(self.command, self.path, {name.lower(): value for name, value in self.headers.items()})
            answer = poser._respond(seen)
            try:
                self._send(answer)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up on the body, as it should
                self.close_connection = True

        def _send(self, answer: Answer) -> None:
            self.send_response(answer.status)
            pieces = [answer.body] if isinstance(answer.body, bytes) else answer.body
            headers = {name.lower(): value for name, value in answer.headers.items()}
            if answer.framing == "length" and "content-length" not in headers:
                assert isinstance(answer.body, bytes), "a streamed body needs chunked or close framing"
                headers["content-length"] = str(len(answer.body))
            elif answer.framing == "chunked":
                headers["transfer-encoding"] = "chunked"
            elif answer.framing == "close":
                headers["connection"] = "close"
                self.close_connection = True
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            for piece in pieces:
                if answer.pause and not isinstance(answer.body, bytes):
                    time.sleep(answer.pause)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if answer.framing == "chunked" else piece)
                self.wfile.flush()
            if answer.framing == "chunked":
                self.wfile.write(b"0\r\n\r\n")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class HubPoser(Poser):
    """One model repo, `REPO`, at one commit: its info, its tree (one page) and its files. `info`, `entries` and
    `files` are read at each request, so a test may change them first."""

    REPO = "org/model"
    COMMIT = "c0ffee" * 6 + "c0ff"

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__()
        self.files = dict(files)
        self.info: Any = {"id": self.REPO, "sha": self.COMMIT, "siblings": [{"rfilename": path} for path in files]}
        self.entries: Any = [
            {"type": "file", "path": path, "size": len(content), "oid": git_blob_id(content)}
            for path, content in files.items()
        ]
        self.answer(rf"^/api/models/{self.REPO}/revision/", lambda _seen: json_answer(self.info))
        self.answer(rf"^/api/models/{self.REPO}/tree/", lambda _seen: json_answer(self.entries))
        self.answer(rf"^/{self.REPO}/resolve/{self.COMMIT}/", self._file)

    @property
    def uri(self) -> str:
        return f"hf://{self.REPO}"

    def _file(self, seen: Seen) -> Answer | None:
        content = self.files.get(seen.path.split(f"/resolve/{self.COMMIT}/", 1)[1])
        return None if content is None else Answer(body=content, headers={"ETag": f'"{git_blob_id(content)}"'})


def listing_page(keys: dict[str, bytes] | list[tuple[str, int, str]], next_token: str | None = None) -> Answer:
    """A ListObjectsV2 page of `keys` (contents, or (key, size, etag) as listed), truncated when `next_token` is
    given."""
    listed = (
        [(key, len(content), hashlib.md5(content).hexdigest()) for key, content in keys.items()]
        if isinstance(keys, dict)
        else keys
    )
    contents = "".join(
        f"<Contents><Key>{escape(key)}</Key><Size>{size}</Size><ETag>&quot;{etag}&quot;</ETag></Contents>"
        for key, size, etag in listed
    )
    more = f"<IsTruncated>true</IsTruncated><NextContinuationToken>{next_token}</NextContinuationToken>"
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{contents}{more if next_token else '<IsTruncated>false</IsTruncated>'}</ListBucketResult>"
    )
    return Answer(headers={"Content-Type": "application/xml"}, body=body.encode())


class S3Poser(Poser):
    """One bucket, `BUCKET`, served path-style to unsigned requests (ANONYMOUS=true): a one-page listing of
    `objects` and their bytes, ranges honoured. `objects` is read at each request."""

    BUCKET = "bucket"

    def __init__(self, objects: dict[str, bytes]) -> None:
        super().__init__()
        self.objects = dict(objects)
        self.answer(rf"^/{self.BUCKET}/?\?", self._listing)
        self.answer(rf"^/{self.BUCKET}/[^?]", self._object)

    @property
    def uri(self) -> str:
        return f"s3://{self.BUCKET}/"

    def _listing(self, seen: Seen) -> Answer:
        prefix = seen.query.get("prefix", "")
        return listing_page({key: content for key, content in sorted(self.objects.items()) if key.startswith(prefix)})

    def _object(self, seen: Seen) -> Answer | None:
        content = self.objects.get(seen.path.split(f"/{self.BUCKET}/", 1)[1])
        if content is None:
            return None
        headers = {"ETag": f'"{hashlib.md5(content).hexdigest()}"'}
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", seen.headers.get("range", ""))
        if wanted is None:
            return Answer(body=content, headers=headers)
        start, end = int(wanted[1]), int(wanted[2])
        headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
        return Answer(206, headers, content[start : end + 1])
