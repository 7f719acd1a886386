"""ListObjectsV2 as plain data: the query for one page and the parsing of its answer. Pure functions, no I/O.

A page is parsed in one pass with ElementTree; botocore's generic response parser costs many times more.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
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
    folders: list[str] = field(default_factory=list)  # common prefixes, when the page was asked with a delimiter


def page_query(
    prefix: str,
    token: str | None,
    max_keys: int = PAGE_SIZE,
    delimiter: str | None = None,
    start_after: str | None = None,
) -> dict[str, str]:
    """The query of one page. Keys come URL-encoded (spaces as +, as S3 does): XML 1.0 cannot carry every
    character a key may hold. With `delimiter`, keys below the next one are rolled up into `folders`; with
    `start_after`, the listing starts after that key."""
    query = {"list-type": "2", "prefix": prefix, "encoding-type": "url", "max-keys": str(max_keys)}
    if token is not None:
        query["continuation-token"] = token
    if delimiter is not None:
        query["delimiter"] = delimiter
    if start_after is not None:
        query["start-after"] = start_after
    return query


def key_ranges(folders: list[str], count: int) -> list[tuple[str, str | None]]:
    """Up to `count` contiguous ranges of keys, [start, end) with None for no end, that together cover every key
    from the first folder on: cut at folders spread evenly over the (sorted) list, so ranges can be listed apart."""
    cuts = sorted({folders[len(folders) * index // count] for index in range(count)}) if folders else []
    return [(start, cuts[index + 1] if index + 1 < len(cuts) else None) for index, start in enumerate(cuts)]


def parse_page(body: bytes) -> ListPage:
    """The objects, common prefixes and continuation token of a ListBucketResult, whatever its XML namespace."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the listing is not valid XML: {exc}") from None
    namespace, _, name = root.tag.rpartition("}")
    if name != "ListBucketResult":
        raise ValueError(f"the listing answer is a <{name}>, not a <ListBucketResult>")
    tag = {local: f"{namespace}}}{local}" if namespace else local for local in _NAMES}  # spelled once a page
    url_encoded = _text(root.find(tag["EncodingType"])) == "url"  # S3 says so when it honoured encoding-type

    def decoded(text: str) -> str:
        return unquote_plus(text) if url_encoded and ("%" in text or "+" in text) else text

    key_tag, size_tag, etag_tag, class_tag, restore_tag = (
        tag[name] for name in ("Key", "Size", "ETag", "StorageClass", "RestoreStatus")
    )
    objects = []
    for entry in root.iterfind(tag["Contents"]):  # one pass over each entry's children: this loop runs per object
        key = etag = ""
        size = 0
        storage_class = "STANDARD"
        restored = False
        for child in entry:
            name = child.tag
            if name == key_tag:
                key = child.text or ""  # not stripped: a key may end in a space
            elif name == size_tag:
                size = int(child.text or 0)
            elif name == etag_tag:
                etag = (child.text or "").strip().strip('"')
            elif name == class_tag:
                storage_class = _text(child) or "STANDARD"
            elif name == restore_tag:
                restore = {status.tag: _text(status) for status in child}
                restored = restore.get(tag["IsRestoreInProgress"]) == "false" and bool(
                    restore.get(tag["RestoreExpiryDate"])
                )
        objects.append(ListedObject(decoded(key), size, etag, storage_class, restored))
    folders = [decoded(element.text or "") for element in root.iterfind(f"{tag['CommonPrefixes']}/{tag['Prefix']}")]
    truncated = _text(root.find(tag["IsTruncated"])) == "true"
    token = _text(root.find(tag["NextContinuationToken"])) if truncated else None
    if truncated and not token:
        raise ValueError("the listing is truncated but carries no NextContinuationToken")
    return ListPage(objects, token, folders)


_NAMES = ("EncodingType", "Contents", "Key", "Size", "ETag", "StorageClass", "RestoreStatus", "IsRestoreInProgress",
          "RestoreExpiryDate", "CommonPrefixes", "Prefix", "IsTruncated", "NextContinuationToken")  # fmt: skip


def _text(element: ET.Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""
