"""The web store's own settings: request headers (a bearer token, an API key), secret as a whole and value by value."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from initializers.common.errors import ConfigError
from initializers.config.settings import Codec, setting_field

#: A header's name, as HTTP allows it (a token).
_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Headers the store writes itself, for what it asks and how it pins a version: one given here would change that.
_OURS = frozenset(
    {"host", "range", "if-match", "if-range", "if-unmodified-since", "if-none-match", "if-modified-since",
     "accept-encoding", "connection", "content-length", "transfer-encoding", "te", "upgrade"}
)  # fmt: skip


def _parse(raw: str) -> tuple[tuple[str, str], ...]:
    """A JSON object of header names and values, each checked; the values never shown."""
    try:
        given = json.loads(raw)
    except ValueError:
        raise ConfigError('HTTP_HEADERS: expected a JSON object, {"Name": "value", ...} (value not shown)') from None
    if not isinstance(given, dict) or not all(isinstance(value, str) for value in given.values()):
        raise ConfigError('HTTP_HEADERS: expected a JSON object of text values, {"Name": "value", ...}')
    for name, value in given.items():
        if not _NAME.fullmatch(name):
            raise ConfigError(f"HTTP_HEADERS: {name!r} is not a header name")
        if name.lower() in _OURS:
            raise ConfigError(f"HTTP_HEADERS: {name} is the initializer's to send (it asks for ranges and versions)")
        if any(char < " " or char == "\x7f" or not char.isascii() for char in value):
            raise ConfigError(f"HTTP_HEADERS: the value of {name} holds a control character or non-ASCII text")
    return tuple(given.items())


def header_secrets(raw: str) -> list[str]:
    """What the logs hide of HTTP_HEADERS: every value, and a credential after its scheme (`Bearer TOKEN`'s token)."""
    try:
        given = json.loads(raw)
    except ValueError:
        return [raw]
    if not isinstance(given, dict):
        return [raw]
    values = [value for value in given.values() if isinstance(value, str) and value]
    return [raw, *values, *(value.partition(" ")[2] for value in values if " " in value)]


_HEADERS: Codec[tuple[tuple[str, str], ...]] = Codec(
    _parse, lambda pairs: json.dumps(dict(pairs)), 'a JSON object of request headers, {"Name": "value", ...}'
)


@dataclass(frozen=True)
class WebOptions:
    http_headers: tuple[tuple[str, str], ...] | None = setting_field(
        "HTTP_HEADERS",
        'Request headers for https:// and http:// URLs, a JSON object ({"Authorization": "Bearer ..."}): a token or an '
        "API key, sent to the URL's host only, never to another a redirect leads to. Secret: never shown.",
        _HEADERS,
        secret=True,
        secret_parts=header_secrets,
    )
