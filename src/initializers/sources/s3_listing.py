"""ListObjectsV2 as plain data: the query for one page and the parsing of its answer. Pure functions, no I/O.

Parsing 1000 keys this way takes a few milliseconds; botocore's generic response parser took ~50 ms a page.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from urllib.parse import unquote_plus

PAGE_SIZE = 1000  # the most S3 returns per page


#: Storage classes whose objects cannot be read until restored (GLACIER_IR, Glacier Instant Retrieval, can).
ARCHIVED = frozenset({"GLACIER", "DEEP_ARCHIVE"})


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int
    etag: str  # without quotes
    storage_class: str = "STANDARD"
    restored: bool = False  # an archived object with a restored copy available (when the listing says so)

    @property
    def archived(self) -> bool:
        """It must be restored before it can be read."""
        return self.storage_class in ARCHIVED and not self.restored


@dataclass(frozen=True)
class ListPage:
    objects: list[ListedObject]
    next_token: str | None  # None on the last page


def page_query(prefix: str, token: str | None, max_keys: int = PAGE_SIZE) -> dict[str, str]:
    """The query of one page. Keys come URL-encoded (spaces as +, as S3 does): XML 1.0 cannot carry every
    character a key may hold."""
    query = {"list-type": "2", "prefix": prefix, "encoding-type": "url", "max-keys": str(max_keys)}
    if token is not None:
        query["continuation-token"] = token
    return query


def parse_page(body: bytes) -> ListPage:
    """The objects and continuation token of a ListBucketResult, whatever its XML namespace."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the listing is not valid XML: {exc}") from None
    if _local(root.tag) != "ListBucketResult":
        raise ValueError(f"the listing answer is a <{_local(root.tag)}>, not a <ListBucketResult>")
    fields = {_local(child.tag): child for child in root}
    url_encoded = _text(fields.get("EncodingType")) == "url"  # S3 says so when it honoured encoding-type
    objects = []
    for entry in root:
        if _local(entry.tag) != "Contents":
            continue
        values = {_local(child.tag): child for child in entry}
        key = values["Key"].text or "" if "Key" in values else ""  # not stripped: a key may end in a space
        restore = {_local(child.tag): _text(child) for child in values.get("RestoreStatus", ())}
        objects.append(
            ListedObject(
                unquote_plus(key) if url_encoded else key,
                int(_text(values.get("Size")) or 0),
                _text(values.get("ETag")).strip('"'),
                _text(values.get("StorageClass")) or "STANDARD",
                restore.get("IsRestoreInProgress") == "false" and bool(restore.get("RestoreExpiryDate")),
            )
        )
    truncated = _text(fields.get("IsTruncated")) == "true"
    token = _text(fields.get("NextContinuationToken")) if truncated else None
    if truncated and not token:
        raise ValueError("the listing is truncated but carries no NextContinuationToken")
    return ListPage(objects, token)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _text(element: ET.Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""
