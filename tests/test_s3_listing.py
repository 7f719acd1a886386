"""Parsing ListObjectsV2 answers: the shapes S3 and S3-compatible servers send."""

from __future__ import annotations

import itertools
import re

import pytest

from initializers.sources.s3 import listing as s3_listing
from initializers.sources.s3.listing import ListedObject, ListPage, key_ranges, page_query, parse_page
from initializers.store.contract import MAX_EMPTY_PAGES

NS = ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


def answer(contents: str, *, namespace: str = NS, extra: str = "") -> bytes:
    head = "<?xml version='1.0' encoding='UTF-8'?>"
    return f"{head}<ListBucketResult{namespace}>{extra}{contents}</ListBucketResult>".encode()


def entry(key: str, size: int, etag: str) -> str:
    return (
        f"<Contents><Key>{key}</Key><LastModified>2026-11-30T00:00:00Z</LastModified>"
        f"<ETag>&quot;{etag}&quot;</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
    )


@pytest.mark.parametrize("namespace", [NS, ""])
def test_objects_and_the_last_page(namespace: str):
    body = answer(entry("a/b.bin", 12, "abc") + entry("a/c.bin", 0, "def-2"), namespace=namespace,
                  extra="<Name>bkt</Name><IsTruncated>false</IsTruncated>")  # fmt: skip
    assert parse_page(body) == ListPage([ListedObject("a/b.bin", 12, "abc"), ListedObject("a/c.bin", 0, "def-2")], None)


def test_each_field_of_an_entry_as_servers_vary_it():
    """A key keeps its spaces, an ETag loses its quotes and padding, and an entry without a storage class (some
    servers leave it out) is STANDARD."""
    contents = "<Contents><Size> 7 </Size><ETag>\n &quot;e1&quot; </ETag><Key> a b </Key></Contents>"
    assert parse_page(answer(contents)).objects == [ListedObject(" a b ", 7, "e1", "STANDARD", False)]


def test_storage_classes_and_restored_copies():
    def archived(storage: str, restore: str = "") -> bool:
        contents = (
            f"<Contents><Key>k</Key><ETag>&quot;e&quot;</ETag><Size>1</Size><StorageClass>{storage}</StorageClass>"
            f"{restore}</Contents>"
        )
        return parse_page(answer(contents)).objects[0].archived

    restored = "<RestoreStatus><IsRestoreInProgress>false</IsRestoreInProgress>" \
        "<RestoreExpiryDate>2026-12-24T00:00:00Z</RestoreExpiryDate></RestoreStatus>"  # fmt: skip
    in_progress = "<RestoreStatus><IsRestoreInProgress>true</IsRestoreInProgress></RestoreStatus>"
    assert archived("GLACIER") and archived("DEEP_ARCHIVE") and archived("DEEP_ARCHIVE", in_progress)
    assert not archived("GLACIER", restored)
    assert not any(archived(storage) for storage in ("STANDARD", "GLACIER_IR", "INTELLIGENT_TIERING", "ONEZONE_IA"))


def test_url_encoded_keys_are_decoded_only_when_the_server_says_so():
    key = "d/caf%C3%A9+1%2B1%3D2.txt"
    decoded = parse_page(answer(entry(key, 1, "e"), extra="<EncodingType>url</EncodingType>"))
    assert decoded.objects[0].key == "d/café 1+1=2.txt"  # S3 writes a space as +
    assert parse_page(answer(entry(key, 1, "e"))).objects[0].key == key  # not encoded: taken as it is


def test_a_truncated_page_carries_its_continuation_token():
    body = answer(
        entry("k", 1, "e"), extra="<IsTruncated>true</IsTruncated><NextContinuationToken>t/1+=</NextContinuationToken>"
    )
    assert parse_page(body).next_token == "t/1+="
    with pytest.raises(ValueError, match="no NextContinuationToken"):
        parse_page(answer(entry("k", 1, "e"), extra="<IsTruncated>true</IsTruncated>"))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>proxy login</html>", "a <html>, not a <ListBucketResult>"),
        (b"not xml at all", "not valid XML"),
    ],
)
def test_answers_that_are_not_listings_are_refused(body: bytes, message: str):
    with pytest.raises(ValueError, match=message):
        parse_page(body)


def test_page_query():
    assert page_query("p/", None) == {"list-type": "2", "prefix": "p/", "encoding-type": "url", "max-keys": "1000"}
    assert page_query("p/", "tok", 1)["continuation-token"] == "tok"
    assert page_query("p/", "tok", 1)["max-keys"] == "1"


@pytest.mark.parametrize("count", [1, 3, 8])
def test_key_ranges_cover_every_folder_once_in_order(count: int):
    folders = [f"p/{i:03d}/" for i in range(20)]
    ranges = key_ranges(folders, count)
    assert len(ranges) == min(count, len(folders)) and ranges[0][0] == folders[0] and ranges[-1][1] is None
    assert all(end == following[0] for (_, end), following in itertools.pairwise(ranges))
    assert key_ranges([], count) == [] and key_ranges(["only/"], count) == [("only/", None)]


@pytest.mark.parametrize("count", [1, 3, 8])
def test_key_ranges_after_a_key_start_just_after_it_and_cut_only_at_later_folders(count: int):
    folders = [f"p/{i:03d}/" for i in range(20)]
    after = "p/007/k.bin"  # the last key listed so far, inside folder 007
    ranges = key_ranges(folders, count, after)
    assert len(ranges) == min(count, 13) and ranges[0][0] == after and ranges[-1][1] is None
    assert all(end == following[0] for (_, end), following in itertools.pairwise(ranges))
    assert all(start > after for start, _ in ranges[1:])
    assert key_ranges([], count, after) == [(after, None)]


def _page(keys: list[str], token: str | None, folders: tuple[str, ...] = ()) -> ListPage:
    return ListPage([ListedObject(key, 1, "e") for key in keys], token, list(folders))


def test_a_chain_of_pages_that_moves_on_is_followed():
    chain = s3_listing.PageChain()
    pages = (_page(["a", "b"], "t1"), _page([], "t2"), _page(["k/0/x"], "t3", ("d/",)), _page(["k/0-y"], None))
    for page in pages:  # keys out of S3's order, as SeaweedFS lists them
        chain.follow(page)


@pytest.mark.parametrize(
    ("pages", "says"),
    [
        ([_page(["a"], "t1"), _page(["b"], "t1")], "repeated the continuation token"),
        ([_page(["a", "b"], "t1"), _page(["a", "b"], "t2")], "listed 'a' .. 'b' again"),
        ([_page(["a"], "t1", ("d/",)), _page(["c"], "t2"), _page(["a"], "t3", ("d/",))], "listed 'a' .. 'd/' again"),
        (
            [_page([], f"t{n}") for n in range(MAX_EMPTY_PAGES)],
            f"{MAX_EMPTY_PAGES} pages in a row listed nothing",
        ),
    ],
    ids=["token", "keys", "folders", "empty"],
)
def test_a_chain_of_pages_that_goes_nowhere_is_refused(pages: list[ListPage], says: str):
    chain = s3_listing.PageChain()
    with pytest.raises(ValueError, match=says):
        for page in pages:
            chain.follow(page)


@pytest.mark.parametrize(
    ("contents", "says"),
    [("<Contents><Size>5</Size></Contents>", "the Key of an entry is missing"),
     ("<Contents><Key>k</Key></Contents>", "the Size of 'k' is a string, not a byte count: ''"),
     ("<Contents><Key>k</Key><Size>-1</Size></Contents>", "not a byte count: '-1'"),
     ("<Contents><Key>k</Key><Size>1e3</Size></Contents>", "not a byte count: '1e3'"),
     ("<Contents><Key>k</Key><Size>\u0663</Size></Contents>", "not a byte count"),  # an Arabic-Indic 3: isdigit()
     (f"<Contents><Key>k</Key><Size>{10**20}</Size></Contents>", f"the Size of 'k' is {10**20} bytes, outside 0 to")],
)  # fmt: skip
def test_an_entry_without_a_key_or_a_byte_count_for_its_size_is_refused(contents: str, says: str):
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_page(answer(contents))


def test_a_key_outside_the_prefix_asked_for_is_refused():
    with pytest.raises(ValueError, match=re.escape("it lists 'other/x', which is not under the prefix 'd/' asked for")):
        parse_page(answer("<Contents><Key>d/a</Key><Size>1</Size></Contents><Contents><Key>other/x</Key><Size>1</Size>"
                          "</Contents>"), "d/")  # fmt: skip
    folders = "<CommonPrefixes><Prefix>other/</Prefix></CommonPrefixes>"
    with pytest.raises(ValueError, match="'other/', which is not under the prefix 'd/'"):
        parse_page(answer(folders), "d/")
    assert parse_page(answer("<Contents><Key>d/a</Key><Size>1</Size></Contents>"), "d/").objects[0].key == "d/a"
