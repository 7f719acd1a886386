"""Listing servers that never finish: an S3 and a Hub poser on loopback, for tests of stopping a run.

Each answers only the listing part of its protocol, in one of these ways (`Stall`):
- `SILENT`: the request is read and never answered (the connection stays open until the server stops);
- `ENDLESS`: every page answers after `ENDLESS_PAGE_SECONDS`, truncated, with a fresh continuation (an S3 token, a Hub
  `Link`) and no entries, so the listing goes on, until a client's own guard gives up on it (100 empty pages in a row
  for both of ours: at that pace, more than the tests' stops take);
- `SLOW`: as `ENDLESS`, each page after a pause of `pause` seconds.
Listing requests are counted as they arrive, so a test can wait until a run is waiting on its listing.
"""

from __future__ import annotations

import enum
import itertools
import json
import threading
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devkit.serving import NoDelay, ServedInThread

COMMIT = "0123456789abcdef0123456789abcdef01234567"


#: The pace of an endless listing's pages: as a server's pages take some time, so that the program's guard against
#: empty pages without end (100 of them) takes 5 s to trip, after the tests' TIMEOUT (3 s) or signal (a few pages in)
#: has stopped the run. Answered at once, its 100 pages came within a second once the server sent without delay.
ENDLESS_PAGE_SECONDS = 0.05


class Stall(enum.Enum):
    SILENT = "silent"
    ENDLESS = "endless"
    SLOW = "slow"


class _Server(NoDelay, ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stopping must not wait for the handlers left hanging


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        poser: StallingServer = self.server.poser  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        try:
            poser.answer(self, url.path, parse_qs(url.query))
        except (BrokenPipeError, ConnectionResetError):  # the client went away: what a stopped run does
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class StallingServer(ABC):
    """Base of the posers: a threaded HTTP server on a free loopback port, stopped on exit."""

    def __init__(self, stall: Stall, pause: float = 1.0) -> None:
        self.stall = stall
        self.pause = pause
        self.listing_requests = 0
        self._asked = threading.Condition()
        self._stopped = threading.Event()
        self._tokens = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.poser = self  # type: ignore[attr-defined]
        self._serving = ServedInThread(self._server, "stalling-server")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StallingServer:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopped.set()
        self._serving.stop()

    @abstractmethod
    def answer(self, handler: _Handler, path: str, query: dict[str, list[str]]) -> None:
        """Answer one GET (or, for a stalled listing, never)."""

    def wait_for_listing(self, pages: int, timeout: float = 60.0) -> None:
        """Return once `pages` listing requests have arrived."""
        with self._asked:
            if not self._asked.wait_for(lambda: self.listing_requests >= pages, timeout):
                raise AssertionError(f"{self.listing_requests} listing requests within {timeout} s, not {pages}")

    def next_page(self) -> int | None:
        """Count a listing request; the number of the page to serve, after the stall's pause; None: never answer."""
        with self._asked:
            self.listing_requests += 1
            self._asked.notify_all()
        if self.stall is Stall.SILENT:
            self._stopped.wait()
            return None
        pause = {Stall.SLOW: self.pause, Stall.ENDLESS: ENDLESS_PAGE_SECONDS}[self.stall]
        if self._stopped.wait(pause):
            return None
        return next(self._tokens)


class StallingS3(StallingServer):
    """ListObjectsV2 (path-style, any bucket) that never ends; any other request is a 404."""

    def answer(self, handler: _Handler, path: str, query: dict[str, list[str]]) -> None:
        if query.get("list-type") != ["2"]:
            handler.reply(
                404, b"<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>", "application/xml"
            )
            return
        page = self.next_page()
        if page is None:
            return
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>'
            f"<IsTruncated>true</IsTruncated><NextContinuationToken>token-{page}</NextContinuationToken>"
            "</ListBucketResult>"
        )
        handler.reply(200, body.encode(), "application/xml")


class StallingHub(StallingServer):
    """A Hub whose every repo resolves to one commit, and whose tree listing never ends."""

    def answer(self, handler: _Handler, path: str, query: dict[str, list[str]]) -> None:
        parts = path.split("/")[1:]
        if len(parts) < 4 or parts[0] != "api" or parts[1] not in ("models", "datasets"):
            handler.reply(404, b'{"error": "not found"}', "application/json", {"X-Error-Code": "EntryNotFound"})
        elif len(parts) >= 5 and parts[4] == "tree":
            page = self.next_page()
            if page is not None:
                link = f'<{self.endpoint}{path}?recursive=true&cursor={page}>; rel="next"'
                handler.reply(200, b"[]", "application/json", {"Link": link})
        else:
            info = {"id": f"{parts[2]}/{parts[3]}", "sha": COMMIT, "private": False, "siblings": []}
            handler.reply(200, json.dumps(info).encode(), "application/json")
