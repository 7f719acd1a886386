"""Answers no store's documentation promises, for the conformance suite (`tests/test_conformance.py`): each store's
listing (and head) answered, in its server's place, by the relay in front of it (a 200 `StatusFault`), with a wrong
shape (JSON's null too), an entry of the wrong type, a size no file has, a key outside the prefix asked for, a page
token that is none. A run must refuse each with exit 1 naming the server and what is wrong, never as an internal
error.

Every case has one name across stores; each store makes those its answers can carry (`Store.malformed_answers`, in
its module of `devkit.conformance`) with `case_maker`, and has no entry for the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devkit.relay import Relay, StatusFault

if TYPE_CHECKING:
    from devkit.conformance import Store

#: The cases, by name: the suite runs each against every store.
CASES = ("shape", "null", "entry", "no-name", "huge-size", "negative-size", "outside-prefix", "token", "head")
#: A size beyond 2^63 - 1, as the issue's probes listed it.
HUGE = 10**20
#: The one-object URI a head case points the program at (under the store's prefix), and what it lists instead.
ONE, OUTSIDE = "one.txt", "other/x"


@dataclass(frozen=True)
class MalformedAnswer:
    """`body` answered (200) on `relay` to every request whose path holds `match`; the program pointed at `uri` when
    given (a head's case: one object's URI); its error must hold `says`."""

    relay: Relay
    match: str
    body: bytes
    says: str
    content_type: str = "application/json"
    uri: str | None = None

    def fault(self) -> StatusFault:
        return StatusFault(status=200, times=None, match=self.match, body=self.body, content_type=self.content_type)


def case_maker(store: Store, encoded: Callable[[Any], bytes], content_type: str) -> Callable[..., MalformedAnswer]:
    """The maker of `store`'s cases: a body (`encoded` as its server's answers are) answered on the relay in front of
    its listing, or of the requests whose path holds `match`; `uri` the program is pointed at, if not the store's."""
    relay, listing = store.listing()

    def case(body: Any, says: str, match: str = listing, uri: str | None = None) -> MalformedAnswer:
        return MalformedAnswer(relay, match, encoded(body), says, content_type, uri)

    return case


def as_json(payload: Any) -> bytes:
    return json.dumps(payload).encode()
