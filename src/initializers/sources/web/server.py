"""Requests for one file on a web server (`location`), on our HTTP/1.1 connections: a probe for its size, version and
digest (a GET of its first byte), then GETs of it, whole or by Range, pinned to the version the probe saw: If-Match on
a strong ETag, else If-Unmodified-Since on its Last-Modified, and each answer's own ETag or Last-Modified compared.
Redirects are followed, the given headers (HTTP_HEADERS) sent to the URL's own origin only, as curl sends them.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from initializers.common.errors import FetchError, changed_during_download
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, Discard, ObjectRead, ObjectReads, redirect_of
from initializers.sources.web.digests import vouched
from initializers.sources.web.location import WebLocation
from initializers.store import answers

#: Where our connections take their CA certificates from, for messages.
TRUST = "SSL_CERT_FILE (or SSL_CERT_DIR)"
#: What a URL's path and query keep as they are when sent: what RFC 3986 allows there, escapes included.
_URL_SAFE = "/%:@!$&'()*+,;=~-._?"
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: `filename*=UTF-8''NAME` (RFC 6266's encoded form) or `filename="NAME"` / `filename=NAME`.
_ENCODED_NAME = re.compile(r"filename\*\s*=\s*([A-Za-z0-9-]+)'[^']*'([^;]+)", re.I)
_NAME = re.compile(r'filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))', re.I)


@dataclass(frozen=True)
class Probed:
    """What the first answer told of the file."""

    size: int
    #: It answered a Range with exactly that range: the file may be read in parallel ranges.
    ranges: bool
    etag: str | None
    last_modified: str | None
    checksum: Checksum | None
    #: The name Content-Disposition gives, if any.
    filename: str | None


class WebServer:
    """GETs of one URL, redirects followed, pinned once probed. Thread-safe."""

    def __init__(self, location: WebLocation, headers: tuple[tuple[str, str], ...], timeout: float) -> None:
        self.location = location
        parts = urlsplit(location.url)
        self._origin = (parts.scheme.lower(), parts.netloc)
        self._given = dict(headers)
        self._http = HttpGetter(ssl.create_default_context, timeout, TRUST)
        self._probed: Probed | None = None
        #: Its files' reads (`ObjectReads`); a resume answered whole starts over (a server that ignores Range).
        self.objects = ObjectReads(self._http, self, starts_over=True)

    @property
    def server(self) -> str:
        return f"{self._origin[0]}://{self._origin[1]}"

    def probe(self) -> Probed:
        """The file's size, version and digest, from a GET of its first byte (its whole answer, when the server
        ignores Range, is left unread)."""
        read = ObjectRead(self.location.url, None, 0, 1, None, self.location.shown, "open")
        self._probed = self._http.retrying("open", read.where, lambda: self._probe_once(read))
        return self._probed

    def read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """The read of the file's bytes [offset, offset + length), pinned to the version probed."""
        return ObjectRead(self.location.url, file.version, offset, length, file.size, self.location.shown, "download")

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        return self._request_to(read.name, answer)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> Request | None:
        """A redirect followed (http:// and https:// only); a failure raised as what it means; another version than
        probed refused."""
        url = redirect_of(read, sent, response)
        if url is not None:
            return self._request_to(url, answer)
        probed = self._probed
        if probed is None and response.status == 416 and response.header("content-range") == "bytes */0":
            return None  # the probe's first byte, of an empty file
        if response.status not in (200, 206):
            raise self._failure(response, read.where)
        if probed is not None:
            for name, seen in (("ETag", probed.etag), ("Last-Modified", probed.last_modified)):
                now = response.header(name.lower())
                if seen and now and now != seen:
                    raise FetchError(changed_during_download(read.where, f"its {name} {seen} became {now}"))
        return None

    def _probe_once(self, read: ObjectRead) -> Probed:
        response = self.objects.head(read, Answer(0, 0, True, Discard()))
        content_range = response.header("content-range") or ""
        ranged = content_range.startswith("bytes 0-0/")  # a 206, or a 200 saying so (as rclone's servers answer)
        empty = response.status == 416
        total = "0" if empty else content_range.rpartition("/")[2] if ranged else response.length
        if total is None:
            self._http.close_thread_connections()
            raise FetchError(
                f"{read.where}: {self.server} gives the file no size (no Content-Range nor Content-Length)"
            )
        with answers.read_from(self.server, f"opening {read.where}"):
            size = answers.size(total, "the file's size")
        if ranged or empty:
            response.read_all()
        else:
            self._http.close_thread_connections()  # rather than read a whole file nobody asked for yet
        return Probed(
            size,
            ranged,
            response.header("etag"),
            response.header("last-modified"),
            vouched(response, whole=not ranged),
            _filename(response.header("content-disposition") or ""),
        )

    def _request_to(self, url: str, answer: Answer) -> Request:
        """The GET of `answer`'s bytes at `url`, pinned, with the given headers only on the URL's own origin."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        headers = {"host": parts.netloc, "user-agent": USER_AGENT, "accept-encoding": "identity"}
        if (scheme, parts.netloc) == self._origin:
            headers.update(self._given)
        if answer.ranged:
            headers["range"] = f"bytes={answer.start}-{answer.end}"
        probed = self._probed
        if probed is not None and probed.etag and not probed.etag.startswith("W/"):
            headers["if-match"] = probed.etag
        elif probed is not None and probed.last_modified:
            headers["if-unmodified-since"] = probed.last_modified
        target = _escaped(parts.path or "/") + (f"?{_escaped(parts.query)}" if parts.query else "")
        return Request(scheme, parts.netloc, target, headers)

    def _failure(self, response: Response, where: str) -> Exception:
        """A failed answer as the exception that says what to do (its body unread: it may quote the request)."""
        response.read_all(0)
        status = response.status
        if status in RETRIABLE_STATUS or status >= 500:
            return retriable(status, response.reason, response.header("retry-after"))
        if status == 412:
            return FetchError(changed_during_download(where, f"its version no longer matches: {status}"))
        if status == 416:
            return FetchError(changed_during_download(where, f"it is shorter than it was: {status}"))
        if status in (401, 403):
            return FetchError(
                f"{self.server} refused {where} ({status} {response.reason}): check HTTP_HEADERS (a token or a key), "
                "or a presigned URL's expiry"
            )
        if status in (404, 410):
            return FetchError(f"{where} was not found at {self.server} ({status} {response.reason})")
        return FetchError(f"{self.server} answered {status} {response.reason} for {where}")


def _escaped(text: str) -> str:
    """A URL's path or query as sent: escapes kept, what may not stand there escaped (a space, `é`, a lone `%`)."""
    return quote(_LONE_PERCENT.sub("%25", text), safe=_URL_SAFE)


def _filename(disposition: str) -> str | None:
    """The file name a Content-Disposition gives (its encoded form first), its last segment only; None: none."""
    if found := _ENCODED_NAME.search(disposition):
        name = unquote(found[2].strip(), encoding=found[1] if found[1].lower() == "utf-8" else "latin-1")
    elif found := _NAME.search(disposition):
        name = found[1].replace('\\"', '"') if found[1] is not None else found[2]
    else:
        return None
    name = name.replace("\\", "/").rpartition("/")[2].strip()
    return name if name not in ("", ".", "..") else None
