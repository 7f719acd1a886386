"""List Blobs as plain data: one page's query, its answer parsed, and a chain of pages checked to end. No I/O."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote

from initializers.common.remote_file import base64_digest
from initializers.sources.http import pages
from initializers.store import answers

#: The most blobs Azure lists on a page.
PAGE_SIZE = 5000


class ListedBlob(NamedTuple):
    """One blob of a page (a named tuple, cheap to make: a listing makes one per blob)."""

    name: str
    size: int
    etag: str  # without quotes
    #: The Content-MD5 recorded, as hex: a blob put in one request has one, one committed from blocks none unless set.
    md5: str | None
    #: Hot, Cool, Cold or Archive ("" when the listing says nothing).
    tier: str = ""
    #: A directory of an account with a hierarchical namespace (Data Lake), listed as an empty blob.
    directory: bool = False

    @property
    def archived(self) -> bool:
        """It must be rehydrated to another tier before it can be read."""
        return self.tier == "Archive"


@dataclass(frozen=True)
class ListPage:
    blobs: list[ListedBlob]
    next_marker: str | None  # None on the last page


def page_query(prefix: str, marker: str | None, max_results: int = PAGE_SIZE) -> dict[str, str]:
    """The query of one page of the container's blobs under `prefix`, from `marker` (the last page's NextMarker)."""
    query = {"restype": "container", "comp": "list", "maxresults": str(max_results)}
    if prefix:
        query["prefix"] = prefix
    if marker:
        query["marker"] = marker
    return query


def parse_page(body: bytes, prefix: str = "") -> ListPage:
    """The blobs and NextMarker of an EnumerationResults listed for `prefix`; ValueError saying what is wrong."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the listing is not valid XML: {exc}") from None
    if root.tag != "EnumerationResults":
        raise ValueError(f"the listing answer is a <{root.tag}>, not an <EnumerationResults>")
    blobs = [_blob(entry, prefix) for entry in root.iterfind("Blobs/Blob")]
    return ListPage(blobs, (root.findtext("NextMarker") or "").strip() or None)


def _blob(entry: ET.Element, prefix: str) -> ListedBlob:
    name_element = entry.find("Name")
    name = "" if name_element is None else name_element.text or ""  # not stripped: a name may end in a space
    if name_element is not None and name_element.get("Encoded") == "true":  # characters XML cannot carry
        name = unquote(name)
    properties = entry.find("Properties")
    if not name or properties is None:
        raise ValueError(f"an entry of the listing has no Name or no Properties (Name {name!r})")
    answers.under(prefix, name)
    size = answers.size((properties.findtext("Content-Length") or "").strip(), f"the Content-Length of {name!r}")
    md5 = (properties.findtext("Content-MD5") or "").strip()
    etag = (properties.findtext("Etag") or "").strip().strip('"')
    tier = (properties.findtext("AccessTier") or "").strip()
    directory = (properties.findtext("ResourceType") or "").strip() == "directory"
    return ListedBlob(name, size, etag, _hex_md5(name, md5) if md5 else None, tier, directory)


def _hex_md5(name: str, value: str) -> str:
    digest = base64_digest(value, 16)
    if digest is None:
        raise ValueError(f"the listing gives {name!r} a Content-MD5 that is no MD5 ({value!r})")
    return digest.hex()


class PageChain(pages.PageChain):
    token_name = "NextMarker"

    def follow(self, page: ListPage) -> None:
        self.follow_entries(tuple(blob.name for blob in page.blobs), page.next_marker)
