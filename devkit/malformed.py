"""Answers no store's documentation promises, for the conformance suite (`tests/test_conformance.py`): each store's
listing (and head) answered, in its server's place, by the relay in front of it (a 200 `StatusFault`), with a wrong
shape (JSON's null too), an entry of the wrong type, a size no file has, a key outside the prefix asked for, a page
token that is none. A run must refuse each with exit 1 naming the server and what is wrong, never as an internal
error.

Every case has one name across stores; a store whose answers cannot carry a case has no entry for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

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


def malformed_answers(store: Store) -> dict[str, MalformedAnswer]:
    """The cases `store`'s answers can carry; none for the cache, whose listing is a table's metadata and manifests,
    read by pyiceberg in ranges (Avro manifests its own types bound), which a 200 in the server's place cannot
    answer."""
    makers = {"s3": _s3, "gs": _gcs, "az": _azure, "hf": _hub}
    return makers[store.scheme](store) if store.scheme in makers else {}


def _case_maker(store: Any, encoded: Callable[[Any], bytes], content_type: str) -> Callable[..., MalformedAnswer]:
    """The maker of `store`'s cases: a body (`encoded` as its server's answers are) answered on the relay in front of
    its listing, or of the requests whose path holds `match`; `uri` the program is pointed at, if not the store's."""
    relay, listing = store.listing()

    def case(body: Any, says: str, match: str = listing, uri: str | None = None) -> MalformedAnswer:
        return MalformedAnswer(relay, match, encoded(body), says, content_type, uri)

    return case


def _json(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def _s3(store: Any) -> dict[str, MalformedAnswer]:
    def page(contents: str, more: str = "<IsTruncated>false</IsTruncated>") -> bytes:
        return (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"{more}{contents}</ListBucketResult>"
        ).encode()

    def entry(key: str, size: object) -> str:
        return f"<Contents><Key>{key}</Key><Size>{size}</Size><ETag>&quot;e&quot;</ETag></Contents>"

    case = _case_maker(store, bytes, "application/xml")

    prefix = f"{store.prefix}/"
    return {
        "shape": case(b"<Error><Code>NoSuchKey</Code></Error>", "not a <ListBucketResult>"),
        "entry": case(page("<Contents>x</Contents>"), "the Key of an entry is missing"),
        "no-name": case(page("<Contents><Size>1</Size></Contents>"), "the Key of an entry is missing"),
        "huge-size": case(page(entry(f"{prefix}a", HUGE)), f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
        "negative-size": case(page(entry(f"{prefix}a", -1)), "not a byte count: '-1'"),
        "outside-prefix": case(page(entry(OUTSIDE, 1)), f"it lists {OUTSIDE!r}, which is not under the prefix"),
        "token": case(page(entry(f"{prefix}a", 1), "<IsTruncated>true</IsTruncated>"), "no NextContinuationToken"),
        "head": case(
            page(entry(f"{prefix}{ONE}", HUGE)),
            f"is {HUGE} bytes",
            match="max-keys=1&",
            uri=f"s3://{store.bucket}/{prefix}{ONE}",
        ),
    }


def _gcs(store: Any) -> dict[str, MalformedAnswer]:
    case = _case_maker(store, _json, "application/json")

    def item(name: Any = f"{store.prefix}/a", size: Any = "1") -> dict[str, Any]:
        return {"name": name, "size": size, "generation": "1", "crc32c": "AAAAAA=="}

    one = f"{store.prefix}/{ONE}"
    return {
        "shape": case([], "a page is a list, not an object: []"),
        "null": case(None, "a page is missing or null"),
        "entry": case({"items": ["a"]}, "an item of a page is a string, not an object: 'a'"),
        "no-name": case({"items": [{k: v for k, v in item().items() if k != "name"}]}, "an item's name is missing"),
        "huge-size": case({"items": [item(size=str(HUGE))]}, f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
        "negative-size": case({"items": [item(size="-1")]}, "not a byte count: '-1'"),
        "outside-prefix": case({"items": [item(OUTSIDE)]}, f"it lists {OUTSIDE!r}, which is not under the prefix"),
        "token": case({"items": [item()], "nextPageToken": ["t"]}, "a page's nextPageToken is a list, not a name"),
        "head": case(
            item(one, size=str(HUGE)),
            f"is {HUGE} bytes",
            match=f"/o/{quote(one, safe='')}?fields",
            uri=f"gs://{store.bucket}/{one}",
        ),
    }


def _azure(store: Any) -> dict[str, MalformedAnswer]:
    def page(blobs: str) -> bytes:
        return (
            f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>{blobs}</Blobs><NextMarker/>'
            "</EnumerationResults>"
        ).encode()

    def blob(name: str, size: object) -> str:
        return (
            f"<Blob><Name>{name}</Name><Properties><Content-Length>{size}</Content-Length><Etag>&quot;e&quot;</Etag>"
            "</Properties></Blob>"
        )

    case = _case_maker(store, bytes, "application/xml")

    prefix = f"{store.prefix}/"
    return {
        "shape": case(b"<Error><Code>InternalError</Code></Error>", "not an <EnumerationResults>"),
        "entry": case(page("<Blob>x</Blob>"), "has no Name or no Properties"),
        "no-name": case(page(blob("", 1)), "has no Name or no Properties"),
        "huge-size": case(page(blob(f"{prefix}a", HUGE)), f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
        "negative-size": case(page(blob(f"{prefix}a", -1)), "not a byte count: '-1'"),
        "outside-prefix": case(page(blob(OUTSIDE, 1)), f"it lists {OUTSIDE!r}, which is not under the prefix"),
        "head": case(
            page(blob(f"{prefix}{ONE}", HUGE)),
            f"is {HUGE} bytes",
            match="maxresults=1&",
            uri=f"az://{store.container}/{prefix}{ONE}",
        ),
    }


def _hub(store: Any) -> dict[str, MalformedAnswer]:
    def file(path: Any = "a.txt", size: Any = 1) -> dict[str, Any]:
        return {"type": "file", "path": path, "size": size, "oid": "0" * 40}

    case = _case_maker(store, _json, "application/json")

    wrong = "is not what the Hub's API sends"
    return {
        "shape": case({"path": "a.txt"}, wrong),
        "null": case(None, wrong),
        "entry": case(["a.txt"], wrong),
        "no-name": case([{k: v for k, v in file().items() if k != "path"}], wrong),
        "huge-size": case([file(size=HUGE)], f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
        "negative-size": case([file(size=-1)], "is -1 bytes, outside 0 to 2^63 - 1"),
        "outside-prefix": case(
            [file(OUTSIDE)],
            f"it lists {OUTSIDE!r}, which is not under the prefix 'small/'",
            uri=f"hf://datasets/{store.repo}/small",
        ),
        "head": case([], wrong, match="/revision/"),
    }
