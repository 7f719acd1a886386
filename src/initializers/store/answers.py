"""How every store's listings and heads are read: the fields they carry (a record, a list, a name, a byte count, a
token), each checked for what the store's documentation promises, once for every store. An answer that holds
anything else (a wrong type, a missing field, a size no file has, a key outside the prefix asked for) is `Malformed`,
saying what is wrong; a source declares its answers' shapes with these readers, and where it reads an answer,
`read_from` makes that the FetchError naming the server (exit 1), never an internal error.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from initializers.common.errors import FetchError

#: The largest byte count a file may be listed with: SQLite's INTEGER (the plan's index), a file offset (off_t).
MAX_SIZE = (1 << 63) - 1
#: How much of a wrong value a message quotes.
_SHOWN = 80


class Malformed(ValueError):
    """An answer of a shape the store's documentation does not promise; the message says what is wrong with it."""


def shown(value: Any) -> str:
    """A value as a message quotes it, cut short: a server chooses its length."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."


def parsed(body: bytes | str, what: str) -> Any:
    """A JSON body's value; Malformed when it is not JSON, or nests deeper than the parser recurses (a server can send
    `[[[[...` for a megabyte, which `json` meets with a RecursionError, not a ValueError)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise Malformed(f"{what} is not JSON") from None


def record(value: Any, what: str) -> Mapping[str, Any]:
    """An object (a JSON object's fields)."""
    if not isinstance(value, Mapping):
        raise _wrong(value, what, "an object")
    return value


def records(value: Any, what: str) -> list[Any]:
    """A list; an absent one (None) is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _wrong(value, what, "a list")
    return value


def text(value: Any, what: str) -> str:
    """A string of at least one character."""
    if not isinstance(value, str) or not value:
        raise _wrong(value, what, "a name")
    return value


def token(value: Any, what: str) -> str | None:
    """A page token: a string, or None (absent, or empty) on the last page."""
    if value is None or value == "":
        return None
    return text(value, what)


def size(value: Any, what: str) -> int:
    """A byte count, 0 to MAX_SIZE: an integer, or its decimal digits (JSON APIs send 64-bit integers as strings,
    XML ones as text)."""
    return _whole(value, what, "byte count", " bytes")


def count(value: Any, what: str) -> int:
    """A count of things (a data file's rows), 0 to MAX_SIZE, as `size` reads it."""
    return _whole(value, what, "count", "")


def _whole(value: Any, what: str, kind: str, unit: str) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise _wrong(value, what, f"a {kind}")
    if not 0 <= number <= MAX_SIZE:
        raise Malformed(f"{what} is {number}{unit}, outside 0 to 2^63 - 1")
    return number


def digits(value: Any, what: str) -> str:
    """A number as its decimal digits (a generation, a version), kept as text."""
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()):
        raise _wrong(value, what, "a string of digits")
    return value


def under(prefix: str, key: str) -> str:
    """The path of a listed `key` relative to the `prefix` the listing asked for; Malformed when the key lies outside
    it (stripping the prefix's length would make up another name)."""
    if not key.startswith(prefix):
        raise Malformed(f"it lists {shown(key)}, which is not under the prefix {shown(prefix)} asked for")
    return key[len(prefix) :]


@contextlib.contextmanager
def read_from(server: str, what: str) -> Iterator[None]:
    """Malformed raised in the block, as the FetchError naming `server` and `what` was being read (`listing <URI>`):
    a server's answer is what went wrong, not the program."""
    try:
        yield
    except Malformed as exc:
        raise FetchError(f"{what} at {server}: {exc}") from None


def _wrong(value: Any, what: str, expected: str) -> Malformed:
    """`what` is not the `expected` kind of value: absent (or null), or another kind, shown."""
    if value is None:
        return Malformed(f"{what} is missing or null")
    return Malformed(f"{what} is {_kind(value)}, not {expected}: {shown(value)}")


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list"}.get(
        type(value), "an object" if isinstance(value, Mapping) else type(value).__name__
    )
