"""Where on the web `STORAGE_URI` points: one file, `https://HOST[:PORT]/PATH[?QUERY][#sha256=HEX]` (or `http://`),
its digest pinned in the fragment as pip reads it. A query may be a presigned URL's signature: it is never shown
(`shown`), and is no part of the `place` (a URL signed again names the same file). No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from initializers.common.errors import ConfigError
from initializers.common.remote_file import Checksum

#: A fragment pinning the file's digest: the algorithm and its hex digits, as many as it has.
_PINNED = re.compile(r"(sha256|sha512)=([0-9a-fA-F]+)")
_HEX_DIGITS = {"sha256": 64, "sha512": 128}
#: What stands for a query in every message, the manifest and the log.
HIDDEN_QUERY = "?***"


@dataclass(frozen=True)
class WebLocation:
    """One file's URL (without its fragment), and the digest the fragment pins (None: none pinned)."""

    url: str
    pinned: Checksum | None = None

    USAGE: ClassVar[str] = "https://HOST[:PORT]/PATH[?QUERY][#sha256=HEX]"

    @classmethod
    def parse(cls, uri: str) -> WebLocation:
        """The location `uri` names; a ConfigError naming STORAGE_URI, never showing its query, when it is not one."""
        try:
            parts = urlsplit(uri)
            port = parts.port  # a port out of range or not a number raises
        except ValueError as exc:
            raise ConfigError(f"STORAGE_URI: {_shown(uri)!r} is not a URL ({exc}); expected {cls.USAGE}") from None
        shown = _shown(uri)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"STORAGE_URI: {shown!r} names no host; expected {cls.USAGE}")
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"STORAGE_URI: {shown!r} carries a user name or password: give credentials in HTTP_HEADERS (an "
                "Authorization header), where they stay out of logs, messages and the manifest"
            )
        if port == 0:
            raise ConfigError(f"STORAGE_URI: {shown!r} names port 0; expected {cls.USAGE}")
        pinned = None
        if parts.fragment:
            found = _PINNED.fullmatch(parts.fragment)
            if found is None or len(found[2]) != _HEX_DIGITS[found[1]]:
                raise ConfigError(
                    f"STORAGE_URI: {shown!r}: its fragment pins no digest; expected #sha256= and 64 hex digits or "
                    "#sha512= and 128"
                )
            pinned = Checksum(found[1], found[2].lower())
        return cls(uri.partition("#")[0], pinned)

    @property
    def plain(self) -> bool:
        """The URL is http://: the bytes and the headers travel unencrypted."""
        return self.url[:5].lower() == "http:"

    @property
    def place(self) -> str:
        """What is fetched, whatever its version or signature: the URL without its query."""
        parts = urlsplit(self.url)
        return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}"

    @property
    def shown(self) -> str:
        """The URL as messages, logs and the manifest show it: its query, if any, hidden."""
        return _shown(self.url)

    @property
    def name(self) -> str:
        """The file's name: the last segment of the path, percent-decoded ("" when the path ends in none)."""
        return unquote(urlsplit(self.url).path.rpartition("/")[2])

    def __str__(self) -> str:
        pinned = f"#{self.pinned.algorithm}={self.pinned.hexdigest}" if self.pinned else ""
        return self.shown + pinned


def _shown(uri: str) -> str:
    """`uri` without its query (`HIDDEN_QUERY` in its place) nor a password before its host."""
    head, question, rest = uri.partition("?")
    if question:
        fragment = rest.partition("#")[2]
        uri = head + HIDDEN_QUERY + (f"#{fragment}" if fragment else "")
    scheme, sep, after = uri.partition("://")
    authority, slash, path = after.partition("/")
    if sep and "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"
