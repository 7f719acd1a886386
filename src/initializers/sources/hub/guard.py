"""Guards on huggingface_hub's API client (repo info, tree listings): its pagination resends a listing's first request's
headers, the token among them, to any URL a page's `Link: <...>; rel="next"` names, while pages name one. So, on every
request and answer:
- the token goes only to the Hub's own origin (as `get` never sends it to the CDN a download is redirected to);
- only http:// and https:// are followed, a refused scheme failing at once, not as a network failure retried;
- each request is bounded by READ_TIMEOUT (huggingface_hub sets none for API calls);
- a listing whose `Link`s come back to a page already listed, or that goes `MAX_EMPTY_PAGES` pages without an entry,
  is refused: it would never end. The listing says when it starts (`listing`) and when an entry arrives (`progressed`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from initializers.common.errors import FetchError
from initializers.sources.http.http1 import CONNECT_TIMEOUT
from initializers.store.contract import MAX_EMPTY_PAGES


@dataclass
class _Listing:
    what: str
    pages: set[str] = field(default_factory=set)  # the URLs of the pages answered so far
    without_entries: int = 0


class HubGuard:
    def __init__(self, endpoint: str, read_timeout: float) -> None:
        hub = urlsplit(endpoint)
        self.endpoint = endpoint
        self._origin = _origin(hub.scheme, hub.hostname, hub.port)
        self._timeout = {"connect": min(CONNECT_TIMEOUT, read_timeout), "read": read_timeout, "write": read_timeout}
        self._local = threading.local()  # the listing this thread is paginating, if any

    def install(self, client: Any) -> None:
        """Add the guards to huggingface_hub's shared `httpx2.Client` (in place of an earlier HubGuard's)."""
        hooks = client.event_hooks

        def others(kind: str) -> list[Any]:
            return [hook for hook in hooks.get(kind, []) if not isinstance(getattr(hook, "__self__", None), HubGuard)]

        client.event_hooks = {
            **hooks,
            "request": [*others("request"), self._on_request],
            "response": [*others("response"), self._on_response],
        }

    @contextlib.contextmanager
    def listing(self, what: str) -> Iterator[None]:
        """The requests this thread makes inside are one paginated listing of `what` (for messages)."""
        self._local.listing = _Listing(what)
        try:
            yield
        finally:
            self._local.listing = None

    def progressed(self) -> None:
        """The listing delivered an entry (inside `listing`, on its thread)."""
        self._local.listing.without_entries = 0

    def _on_request(self, request: Any) -> None:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise FetchError(f"the Hub at {self.endpoint} sent us to a {url.scheme}:// URL; only http(s) is followed")
        if _origin(url.scheme, url.host, url.port) != self._origin:
            request.headers.pop("authorization", None)
        timeout = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {**timeout, **{k: v for k, v in self._timeout.items() if not timeout.get(k)}}

    def _on_response(self, response: Any) -> None:
        listing: _Listing | None = getattr(self._local, "listing", None)
        if listing is None or response.status_code != 200:
            return
        listing.pages.add(str(response.url))
        following = response.links.get("next", {}).get("url")
        if following is None:
            return
        following = urljoin(str(response.url), following)
        if following in listing.pages:
            raise FetchError(
                f"listing {listing.what}: the Hub at {self.endpoint} paginates back to a page it already sent "
                f"({following}): the listing would never end"
            )
        listing.without_entries += 1
        if listing.without_entries > MAX_EMPTY_PAGES:
            raise FetchError(
                f"listing {listing.what}: the Hub at {self.endpoint} sent {MAX_EMPTY_PAGES} pages in a row without an "
                "entry: the listing would never end"
            )


def _origin(scheme: str, host: str | None, port: int | None) -> tuple[str, str, int]:
    """An origin as browsers compare them: scheme, host and port, the scheme's default port spelt out."""
    return scheme, (host or "").lower(), port or (443 if scheme == "https" else 80)
