"""ListObjectsV2 as plain data, no I/O: the query for one page, and its answer parsed in one pass with ElementTree
(botocore's generic response parser costs many times more).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import unquote_plus

from initializers.sources.http import pages
from initializers.store import answers

PAGE_SIZE = 1000  # the most S3 returns per page


#: Storage classes whose objects cannot be read until restored (GLACIER_IR, Glacier Instant Retrieval, can).
ARCHIVED = frozenset({"GLACIER", "DEEP_ARCHIVE"})


class ListedObject(NamedTuple):
    """One entry of a page (a named tuple, cheap to make: a listing makes one per object)."""

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


class PageChain(pages.PageChain):
    def follow(self, page: ListPage) -> None:
        self.follow_entries((*(listed.key for listed in page.objects), *page.folders), page.next_token)


def page_query(
    prefix: str,
    token: str | None,
    max_keys: int = PAGE_SIZE,
    delimiter: str | None = None,
    start_after: str | None = None,
) -> dict[str, str]:
    """Keys come URL-encoded (spaces as +, as S3 does): XML 1.0 cannot carry every character a key may hold. With
    `delimiter`, keys below the next one are rolled up into `folders`."""
    query = {"list-type": "2", "prefix": prefix, "encoding-type": "url", "max-keys": str(max_keys)}
    if token is not None:
        query["continuation-token"] = token
    if delimiter is not None:
        query["delimiter"] = delimiter
    if start_after is not None:
        query["start-after"] = start_after
    return query


def key_ranges(folders: list[str], count: int, after: str | None = None) -> list[tuple[str, str | None]]:
    """Up to `count` contiguous key ranges [start, end) (None: no end) covering every key from the first folder, or from
    just after `after`: cut at folders spread evenly over the sorted ones after it, so ranges can be listed apart."""
    later = [folder for folder in folders if after is None or folder > after]
    at_folders = count - (after is not None)
    cuts = sorted({later[len(later) * index // at_folders] for index in range(at_folders)}) if later else []
    if after is not None:
        cuts.insert(0, after)
    return [(start, cuts[index + 1] if index + 1 < len(cuts) else None) for index, start in enumerate(cuts)]


def parse_page(body: bytes, prefix: str = "") -> ListPage:
    """The objects, common prefixes and continuation token of a ListBucketResult listed for `prefix`, whatever its XML
    namespace; ValueError (`answers.Malformed`) saying what is wrong with it."""
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
    for entry in root.iterfind(tag["Contents"]):  # runs per object: lookups by plain tag name are done in C
        storage_class = (entry.findtext(class_tag) or "").strip() or "STANDARD"
        restored = False
        if storage_class in ARCHIVED and (restore := entry.find(restore_tag)) is not None:
            status = {child.tag: _text(child) for child in restore}
            restored = status.get(tag["IsRestoreInProgress"]) == "false" and bool(status.get(tag["RestoreExpiryDate"]))
        key = decoded(answers.text(entry.findtext(key_tag), "the Key of an entry"))  # not stripped: may end in a space
        answers.under(prefix, key)
        size = answers.size((entry.findtext(size_tag) or "").strip(), f"the Size of {key!r}")
        etag = (entry.findtext(etag_tag) or "").strip().strip('"')
        objects.append(ListedObject(key, size, etag, storage_class, restored))
    folders = [decoded(element.text or "") for element in root.iterfind(f"{tag['CommonPrefixes']}/{tag['Prefix']}")]
    for folder in folders:
        answers.under(prefix, folder)
    truncated = _text(root.find(tag["IsTruncated"])) == "true"
    token = _text(root.find(tag["NextContinuationToken"])) if truncated else None
    if truncated and not token:
        raise ValueError("the listing is truncated but carries no NextContinuationToken")
    return ListPage(objects, token, folders)


_NAMES = ("EncodingType", "Contents", "Key", "Size", "ETag", "StorageClass", "RestoreStatus", "IsRestoreInProgress",
          "RestoreExpiryDate", "CommonPrefixes", "Prefix", "IsTruncated", "NextContinuationToken")  # fmt: skip


def _text(element: ET.Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""
