"""Hub file downloads: GETs of a file, or of ranges of it, on its `resolve/<commit>/<path>` URL, redirects followed.
huggingface_hub's `hf_hub_download` sends a HEAD before each GET (for a size and digest the tree listing gave us) and
reads bodies through httpx at more CPU per byte (bench/results.md). This sends the GET alone, on our connections,
through `ObjectReads`, into the engine's sink, which checks the digest as the bytes pass. As huggingface_hub does, the
token goes only to the Hub, never to the CDN a download is redirected to; a resume whose Range is ignored starts over.
"""

from __future__ import annotations

import ssl
from dataclasses import replace
from urllib.parse import urlsplit

from initializers.common.clock import Clock
from initializers.common.errors import FetchError
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, Discard, ObjectRead, ObjectReads, redirect_of
from initializers.store.retry import Retriable


def gated(repo: str) -> str:
    return (
        f"{repo} is gated: accept its conditions on the Hub with an account, then set ACCESS_TOKEN to a token of "
        "that account"
    )


def not_found(repo: str) -> str:
    return (
        f"{repo} was not found or is not accessible: check the name and the repo type; for a private repo set "
        "ACCESS_TOKEN (or HF_TOKEN) to a token with read access, or log in with hf auth login"
    )


BAD_TOKEN = "the Hub rejected the token: check ACCESS_TOKEN (or HF_TOKEN, or the one hf auth login saved)"
#: Where both Hub paths take their CA certificates from: Python's default context here, httpx's for huggingface_hub.
HUB_TRUST = "SSL_CERT_FILE (or SSL_CERT_DIR)"


def hub_transient(status: int, reason: str, retry_after_header: str | None) -> Retriable | None:
    """The Hub's one rule for what is worth another attempt, its API's and downloads' alike: a 5xx, a timeout, 429."""
    if status >= 500 or status in RETRIABLE_STATUS:
        return retriable(status, reason, retry_after_header)
    return None


class HubGetter:
    """Downloads of a repo's files by their resolve URLs, redirects followed, as the Hub and its CDN answer."""

    def __init__(self, endpoint: str, token: str | None, repo: str, timeout: float, clock: Clock | None = None) -> None:
        hub = urlsplit(endpoint)
        self._hub_origin = (hub.scheme, hub.netloc)
        self._token = token
        self._repo = repo  # "model OWNER/NAME", for messages
        self._http = HttpGetter(ssl.create_default_context, timeout, HUB_TRUST, clock)
        self.throttle = self._http.throttle
        self._headers = {"user-agent": USER_AGENT, "accept-encoding": "identity"}
        #: Its files' reads (`ObjectReads`), asked and judged as the Hub and its CDN ask and answer.
        self.objects = ObjectReads(self._http, self, starts_over=True)

    def takes_ranges(self, url: str, where: str) -> bool:
        """Whether the server behind `url` (after redirects) answers a Range with exactly that range; olah does not."""
        read = ObjectRead(url, None, 0, 1, None, where, "download")

        def probe() -> bool:
            response = self.objects.head(read, Answer(0, 0, True, Discard()))
            if response.status == 206 and (response.header("content-range") or "").startswith("bytes 0-0/"):
                response.read_all()
                return True
            self._http.close_thread_connections()  # rather than read a whole file nobody asked for
            return False

        return self._http.retrying("download", where, probe)

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """A GET of `answer`'s bytes of the file at `read.name`, its resolve URL (the commit in it) or where that
        redirected, with the token only when it is the Hub's own."""
        parts = urlsplit(read.name)
        headers = {"host": parts.netloc, **self._headers}
        if answer.ranged:
            headers["range"] = f"bytes={answer.start}-{answer.end}"
        if self._token and (parts.scheme, parts.netloc) == self._hub_origin:
            headers["authorization"] = f"Bearer {self._token}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return Request(parts.scheme, parts.netloc, target, headers)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> Request | None:
        """A redirect followed (to http:// and https:// only); the Hub's failure raised as what it means."""
        url = redirect_of(read, sent, response)
        if url is not None:
            return self.request(replace(read, name=url), answer)
        if response.status not in (200, 206):
            raise self._hub_failure(response, read.where)
        return None

    def _hub_failure(self, response: Response, where: str) -> Exception:
        """The Hub's error answer (its X-Error-Code and status) as the exception that says what to do."""
        response.read_all()
        code = response.header("x-error-code") or ""
        message = response.header("x-error-message") or response.reason
        if transient := hub_transient(response.status, message, response.header("retry-after")):
            return transient
        if code == "GatedRepo":
            return FetchError(gated(self._repo))
        if code == "RepoNotFound":
            return FetchError(not_found(self._repo))
        if response.status == 401:
            return FetchError(BAD_TOKEN)
        if code in ("EntryNotFound", "RevisionNotFound") or response.status == 404:
            return FetchError(f"{self._repo}: {where} is missing at the resolved commit ({code or 404})")
        return FetchError(f"the Hub answered {response.status} {message} for {where}")
