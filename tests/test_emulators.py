"""Google's and Microsoft's storage emulators, started by the fixtures, spoken to in plain HTTP: what each holds and
answers about checksums, ranges, versions and errors, the facts the gs:// and az:// stores are to be built on
(issue 58). Each fact is asserted as the emulator shows it, where it differs from the real service too, so that a
new version of an emulator that changes one fails here first."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from devkit.azurite import ACCOUNT, ACCOUNT_KEY, Azurite
from devkit.fake_gcs import FakeGCS


def _table(polynomial: int) -> list[int]:
    rows = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (polynomial if crc & 1 else 0)
        rows.append(crc)
    return rows


_CRC32C, _CRC64 = _table(0x82F63B78), _table(0x9A6C9329AC4BC9B5)


def crc32c(data: bytes) -> str:
    """CRC32C (Castagnoli) as GCS writes it: four bytes big-endian, base64."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return base64.b64encode((crc ^ 0xFFFFFFFF).to_bytes(4, "big")).decode()


def crc64(data: bytes) -> str:
    """CRC-64/NVME as Azure writes it in x-ms-content-crc64: eight bytes little-endian, base64."""
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc = _CRC64[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return base64.b64encode((crc ^ 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")).decode()


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def body_of(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def test_the_checksum_helpers_match_the_published_check_values() -> None:
    assert base64.b64decode(crc32c(b"123456789")) == (0xE3069283).to_bytes(4, "big")
    assert base64.b64decode(crc64(b"123456789")) == (0xAE8B14860A799888).to_bytes(8, "little")


# --- Google Cloud Storage: fake-gcs-server ---------------------------------------------------------------------------


def gcs(server: FakeGCS, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """A GET on the server's JSON API: status, headers (lower case), body, whatever the status."""
    request = urllib.request.Request(server.endpoint + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def media(bucket: str, name: str, **query: str) -> str:
    """The download path of an object (its name quoted whole, slashes too, as the JSON API wants)."""
    return f"/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?" + urllib.parse.urlencode(
        {"alt": "media", **query}
    )


def test_gcs_keeps_each_objects_crc32c_and_md5_and_lists_them(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-hashes")
    body = body_of(300 * 1024, 1)
    put = fake_gcs.put_object("emu-gcs-hashes", "models/m/weights.bin", body)
    fake_gcs.put_object("emu-gcs-hashes", "models/m/config.json", b"{}")
    fake_gcs.put_object("emu-gcs-hashes", "other/x", b"x")
    assert (put["size"], put["crc32c"], put["md5Hash"]) == (str(len(body)), crc32c(body), md5(body))

    status, _, listing = gcs(fake_gcs, "/storage/v1/b/emu-gcs-hashes/o?prefix=models/")
    items = {item["name"]: item for item in json.loads(listing)["items"]}
    assert status == 200 and sorted(items) == ["models/m/config.json", "models/m/weights.bin"]
    listed = items["models/m/weights.bin"]
    assert (listed["crc32c"], listed["md5Hash"], listed["generation"]) == (crc32c(body), md5(body), put["generation"])
    # The ETag is the MD5 in base64 here (real GCS's is an opaque tag of its own).
    assert listed["etag"] == md5(body)

    status, _, metadata = gcs(fake_gcs, "/storage/v1/b/emu-gcs-hashes/o/models%2Fm%2Fweights.bin")
    assert status == 200 and json.loads(metadata)["crc32c"] == crc32c(body)


def test_gcs_lists_in_pages(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-pages")
    for number in range(5):
        fake_gcs.put_object("emu-gcs-pages", f"p/{number}", b"x")
    first = json.loads(gcs(fake_gcs, "/storage/v1/b/emu-gcs-pages/o?prefix=p/&maxResults=2")[2])
    token = urllib.parse.quote(first["nextPageToken"])
    rest = json.loads(gcs(fake_gcs, f"/storage/v1/b/emu-gcs-pages/o?prefix=p/&maxResults=10&pageToken={token}")[2])
    assert [item["name"] for item in first["items"] + rest["items"]] == [f"p/{number}" for number in range(5)]
    assert "nextPageToken" not in rest


def test_gcs_reads_a_byte_range_with_the_whole_objects_hashes(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-ranges")
    body = body_of(100_000, 2)
    put = fake_gcs.put_object("emu-gcs-ranges", "data/part-0", body)

    status, headers, part = gcs(fake_gcs, media("emu-gcs-ranges", "data/part-0"), {"Range": "bytes=1000-1999"})
    assert (status, part) == (206, body[1000:2000])
    assert headers["content-range"] == f"bytes 1000-1999/{len(body)}"
    assert headers["accept-ranges"] == "bytes"
    # As GCS does: the hashes of the whole object, not of the range, and the generation served.
    assert headers["x-goog-hash"] == f"crc32c={crc32c(body)},md5={md5(body)}"
    assert headers["x-goog-generation"] == put["generation"]

    status, headers, tail = gcs(fake_gcs, media("emu-gcs-ranges", "data/part-0"), {"Range": "bytes=-10"})
    assert (status, tail, headers["content-range"]) == (206, body[-10:], "bytes 99990-99999/100000")
    assert gcs(fake_gcs, media("emu-gcs-ranges", "data/part-0"), {"Range": "bytes=200000-200010"})[0] == 416


def test_gcs_pins_a_read_to_a_generation_but_ignores_if_generation_match(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-generations")
    first = fake_gcs.put_object("emu-gcs-generations", "f", b"first version")
    assert gcs(fake_gcs, media("emu-gcs-generations", "f", generation=first["generation"]))[2] == b"first version"

    second = fake_gcs.put_object("emu-gcs-generations", "f", b"second version")
    assert int(second["generation"]) > int(first["generation"])
    # The bucket keeps no versions (the filesystem backend cannot): the replaced generation is gone, as on GCS.
    assert gcs(fake_gcs, media("emu-gcs-generations", "f", generation=first["generation"]))[0] == 404
    assert gcs(fake_gcs, media("emu-gcs-generations", "f", generation=second["generation"]))[2] == b"second version"
    # GCS answers 412 to a read whose ifGenerationMatch fails; this emulator ignores the condition on reads, so
    # pinning must be by `generation=` (which it honours) for the emulator to catch a replaced object.
    status, _, served = gcs(fake_gcs, media("emu-gcs-generations", "f", ifGenerationMatch=first["generation"]))
    assert (status, served) == (200, b"second version")


def test_gcs_answers_404_to_a_missing_bucket_or_object_alike(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-missing")
    status, _, text = gcs(fake_gcs, media("emu-gcs-missing", "nothing"))
    assert (status, text.strip()) == (404, b"Not Found")  # the download path's error is plain text
    status, _, error = gcs(fake_gcs, "/storage/v1/b/emu-gcs-missing/o/nothing")
    assert status == 404 and json.loads(error)["error"]["code"] == 404  # the JSON API's, JSON
    # A missing bucket reads as a missing object: only the bucket's own metadata tells them apart.
    assert gcs(fake_gcs, media("emu-gcs-no-such-bucket", "nothing"))[0] == 404
    assert gcs(fake_gcs, "/storage/v1/b/emu-gcs-no-such-bucket/o")[0] == 404
    assert gcs(fake_gcs, "/storage/v1/b/emu-gcs-no-such-bucket")[0] == 404
    assert gcs(fake_gcs, "/storage/v1/b/emu-gcs-missing")[0] == 200


def test_gcs_serves_a_flipped_byte_under_the_old_hashes_and_an_object_with_a_crc32c_only(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-stored")
    body = body_of(4096, 3)
    fake_gcs.put_object("emu-gcs-stored", "flipped", body)
    stored = fake_gcs.object_file("emu-gcs-stored", "flipped")
    with open(stored, "r+b") as file:
        file.seek(100)
        file.write(bytes([body[100] ^ 0xFF]))
    status, headers, served = gcs(fake_gcs, media("emu-gcs-stored", "flipped"))
    assert status == 200 and served != body and len(served) == len(body)
    assert headers["x-goog-hash"] == f"crc32c={crc32c(body)},md5={md5(body)}"  # the corruption test for free

    # A composite object carries a CRC32C and no MD5 on GCS; here, drop the MD5 from the object's stored metadata.
    fake_gcs.put_object("emu-gcs-stored", "crc32c-only", body)
    stored = fake_gcs.object_file("emu-gcs-stored", "crc32c-only")
    metadata = json.loads(os.getxattr(stored, "user.metadata"))
    del metadata["Md5Hash"]
    os.setxattr(stored, "user.metadata", json.dumps(metadata).encode())
    listed = json.loads(gcs(fake_gcs, "/storage/v1/b/emu-gcs-stored/o/crc32c-only")[2])
    assert listed["crc32c"] == crc32c(body) and "md5Hash" not in listed
    # GCS would send `crc32c=...` alone; this emulator sends an empty md5 beside it.
    assert gcs(fake_gcs, media("emu-gcs-stored", "crc32c-only"))[1]["x-goog-hash"] == f"crc32c={crc32c(body)},md5="


def test_gcs_composes_objects_with_an_md5_unlike_gcs(fake_gcs: FakeGCS) -> None:
    fake_gcs.create_bucket("emu-gcs-compose")
    fake_gcs.put_object("emu-gcs-compose", "a", b"first part|")
    fake_gcs.put_object("emu-gcs-compose", "b", b"second part")
    request = urllib.request.Request(
        f"{fake_gcs.endpoint}/storage/v1/b/emu-gcs-compose/o/joined/compose",
        data=json.dumps({"sourceObjects": [{"name": "a"}, {"name": "b"}], "destination": {}}).encode(),
        method="POST", headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as reply:
        joined = json.loads(reply.read())
    whole = b"first part|second part"
    assert joined["crc32c"] == crc32c(whole)
    # GCS gives a composite object a componentCount and no md5Hash; fake-gcs-server the reverse: a CRC32C-only
    # object is made by editing the stored metadata instead (the test above).
    assert joined["md5Hash"] == md5(whole) and "componentCount" not in joined


# --- Azure Blob Storage: Azurite -------------------------------------------------------------------------------------


def blob_list(server: Azurite, container: str, prefix: str = "") -> dict[str, dict[str, str]]:
    reply = server.request("GET", container, query={"restype": "container", "comp": "list", "prefix": prefix})
    assert reply.status == 200, reply.body[:500]
    return {
        blob.findtext("Name", ""): {field.tag: field.text or "" for field in blob.iterfind("Properties/*")}
        for blob in ET.fromstring(reply.body).iter("Blob")
    }


def flip_stored_byte(server: Azurite, body: bytes, offset: int) -> bytes:
    """Flip the byte at `offset` of a blob's stored bytes, found in the extent files; returns the bytes now held."""
    needle = body[offset - 64 : offset + 64]
    for extent in server.extent_files():
        found = extent.read_bytes().find(needle)
        if found >= 0:
            with open(extent, "r+b") as file:
                file.seek(found + 64)
                file.write(bytes([body[offset] ^ 0xFF]))
            return body[:offset] + bytes([body[offset] ^ 0xFF]) + body[offset + 1 :]
    raise AssertionError("the blob's bytes are in no extent file")


def test_azure_keeps_the_content_md5_of_a_blob_put_in_one_request(azurite: Azurite) -> None:
    azurite.create_container("emu-az-md5")
    body = body_of(300 * 1024, 4)
    put = azurite.put_blob("emu-az-md5", "models/m/weights.bin", body)
    azurite.put_blob("emu-az-md5", "other/x", b"x")
    assert put.headers["content-md5"] == md5(body)

    listed = blob_list(azurite, "emu-az-md5", prefix="models/")
    assert list(listed) == ["models/m/weights.bin"]
    assert listed["models/m/weights.bin"]["Content-MD5"] == md5(body)
    assert listed["models/m/weights.bin"]["Content-Length"] == str(len(body))
    assert listed["models/m/weights.bin"]["BlobType"] == "BlockBlob"

    head = azurite.request("HEAD", "emu-az-md5/models/m/weights.bin")
    assert (head.status, head.headers["content-md5"], head.headers["content-length"]) == (200, md5(body), "307200")
    whole = azurite.request("GET", "emu-az-md5/models/m/weights.bin")
    assert whole.body == body and whole.headers["x-ms-blob-content-md5"] == md5(body)


def test_azure_reads_a_byte_range_with_the_blobs_md5_and_the_ranges_on_request(azurite: Azurite) -> None:
    azurite.create_container("emu-az-ranges")
    body = body_of(5 * 1024 * 1024, 5)
    azurite.put_blob("emu-az-ranges", "big", body)

    part = azurite.request("GET", "emu-az-ranges/big", headers={"x-ms-range": "bytes=1000-1999"})
    assert (part.status, part.body) == (206, body[1000:2000])
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(body)}"
    assert part.headers["x-ms-blob-content-md5"] == md5(body) and "content-md5" not in part.headers
    assert azurite.request("GET", "emu-az-ranges/big", headers={"Range": "bytes=0-9"}).body == body[:10]

    # x-ms-range-get-content-md5: the range's own MD5, for a range of 4 MiB at most.
    four = 4 * 1024 * 1024
    asked = {"x-ms-range": f"bytes=0-{four - 1}", "x-ms-range-get-content-md5": "true"}
    assert azurite.request("GET", "emu-az-ranges/big", headers=asked).headers["content-md5"] == md5(body[:four])
    # Past 4 MiB Azure refuses the request (400); Azurite serves the range without a Content-MD5.
    asked = {"x-ms-range": f"bytes=0-{four}", "x-ms-range-get-content-md5": "true"}
    over = azurite.request("GET", "emu-az-ranges/big", headers=asked)
    assert over.status == 206 and "content-md5" not in over.headers

    past = azurite.request("GET", "emu-az-ranges/big", headers={"x-ms-range": "bytes=6000000-6000010"})
    assert (past.status, past.headers["x-ms-error-code"]) == (416, "InvalidRange")
    assert past.headers["content-range"] == f"bytes */{len(body)}"


def test_azure_offers_no_crc64_on_reads_and_checks_it_on_writes(azurite: Azurite) -> None:
    azurite.create_container("emu-az-crc64")
    body = body_of(10_000, 6)
    azurite.put_blob("emu-az-crc64", "b", body)

    # Strict (the fixture's mode): asking for a range's CRC64 is refused as not implemented.
    asked = {"x-ms-range": "bytes=0-99", "x-ms-range-get-content-crc64": "true"}
    refused = azurite.request("GET", "emu-az-crc64/b", headers=asked)
    assert (refused.status, refused.headers["x-ms-error-code"]) == (500, "FeatureNotSupported")
    # Loose: the header is ignored, and no CRC64 comes back.
    with Azurite.start(loose=True) as loose:
        loose.create_container("emu-az-crc64")
        loose.put_blob("emu-az-crc64", "b", body)
        ignored = loose.request("GET", "emu-az-crc64/b", headers=asked)
        assert (ignored.status, ignored.body) == (206, body[:100])
        assert not any(name.endswith("crc64") for name in ignored.headers)
    # Nor does a whole read or a HEAD carry one, even for a blob put with its CRC64.
    put = azurite.request("PUT", "emu-az-crc64/with-crc", body,
                          headers={"x-ms-blob-type": "BlockBlob", "x-ms-content-crc64": crc64(body)})  # fmt: skip
    assert put.status == 201 and "x-ms-content-crc64" not in put.headers
    for method in ("GET", "HEAD"):
        assert not any(name.endswith("crc64") for name in azurite.request(method, "emu-az-crc64/with-crc").headers)

    # On writes a CRC64 is checked (and a Content-MD5): CRC-64/NVME, eight bytes little-endian in base64.
    wrong = azurite.request("PUT", "emu-az-crc64/wrong", body,
                            headers={"x-ms-blob-type": "BlockBlob", "x-ms-content-crc64": crc64(b"other")})  # fmt: skip
    assert (wrong.status, wrong.headers["x-ms-error-code"]) == (400, "Crc64Mismatch")
    wrong = azurite.request("PUT", "emu-az-crc64/wrong", body,
                            headers={"x-ms-blob-type": "BlockBlob", "Content-MD5": md5(b"other")})  # fmt: skip
    assert (wrong.status, wrong.headers["x-ms-error-code"]) == (400, "Md5Mismatch")
    block = azurite.request("PUT", "emu-az-crc64/blocks", body, query={"comp": "block", "blockid": "YmxvY2stMQ=="})
    assert (block.status, block.headers["x-ms-content-crc64"]) == (201, crc64(body))


def test_azure_records_no_md5_for_a_blob_put_in_blocks_but_computes_one_on_a_read(azurite: Azurite) -> None:
    azurite.create_container("emu-az-blocks")
    first, second = body_of(3000, 7), body_of(3000, 8)
    ids = [base64.b64encode(f"block-{n:04}".encode()).decode() for n in range(2)]
    for block_id, part in zip(ids, (first, second), strict=True):
        staged = azurite.request("PUT", "emu-az-blocks/joined", part, query={"comp": "block", "blockid": block_id})
        assert staged.status == 201
    block_list = "".join(f"<Latest>{block_id}</Latest>" for block_id in ids)
    xml = f'<?xml version="1.0" encoding="utf-8"?><BlockList>{block_list}</BlockList>'.encode()
    committed = azurite.request("PUT", "emu-az-blocks/joined", xml, query={"comp": "blocklist"})
    # Its Content-MD5 is the request body's (the block list), not the blob's.
    assert committed.status == 201 and committed.headers["content-md5"] == md5(xml)
    whole = first + second

    assert "content-md5" not in azurite.request("HEAD", "emu-az-blocks/joined").headers
    assert "Content-MD5" not in blob_list(azurite, "emu-az-blocks")["joined"]
    read = azurite.request("GET", "emu-az-blocks/joined")
    assert read.body == whole and "x-ms-blob-content-md5" not in read.headers
    # A trap: a whole read of a blob of 4 MiB or less without a recorded MD5 gets one computed from the bytes held
    # now, so it vouches for a corrupted copy too (Azure sends none). Only a recorded MD5 (HEAD, the listing,
    # x-ms-blob-content-md5) is evidence.
    held = flip_stored_byte(azurite, whole, 4000)
    read = azurite.request("GET", "emu-az-blocks/joined")
    assert read.body == held and read.headers["content-md5"] == md5(held)


def test_azure_serves_a_flipped_byte_under_the_recorded_md5(azurite: Azurite) -> None:
    azurite.create_container("emu-az-stored")
    body = body_of(8000, 9)
    azurite.put_blob("emu-az-stored", "flipped", body)
    held = flip_stored_byte(azurite, body, 5000)
    read = azurite.request("GET", "emu-az-stored/flipped")
    assert read.body == held != body
    assert read.headers["content-md5"] == read.headers["x-ms-blob-content-md5"] == md5(body)


def test_azure_names_each_error_in_x_ms_error_code(azurite: Azurite) -> None:
    azurite.create_container("emu-az-errors")
    azurite.put_blob("emu-az-errors", "there", b"x")

    def code(method: str, path: str, query: dict[str, str] | None = None, **headers: str) -> tuple[int, str]:
        key = headers.pop("key", ACCOUNT_KEY)
        reply = azurite.request(method, path, query=query, headers=headers, key=key)
        return reply.status, reply.headers.get("x-ms-error-code", "")

    assert code("GET", "emu-az-errors/missing") == (404, "BlobNotFound")
    assert code("HEAD", "emu-az-errors/missing") == (404, "BlobNotFound")  # a HEAD's code is in the header alone
    assert code("GET", "emu-az-no-such/missing") == (404, "ContainerNotFound")
    assert code("HEAD", "emu-az-no-such/missing") == (404, "ContainerNotFound")
    assert code("GET", "emu-az-no-such", query={"restype": "container", "comp": "list"}) == (404, "ContainerNotFound")
    # A wrong key: Azure says AuthenticationFailed, Azurite AuthorizationFailure, both 403.
    wrong_key = base64.b64encode(b"not the development account's key").decode()
    assert code("GET", "emu-az-errors/there", key=wrong_key) == (403, "AuthorizationFailure")
    etag = azurite.request("HEAD", "emu-az-errors/there").headers["etag"]
    azurite.put_blob("emu-az-errors", "there", b"replaced")
    assert code("GET", "emu-az-errors/there", **{"If-Match": etag}) == (412, "ConditionNotMet")
    assert code("PUT", "ab", query={"restype": "container"}) == (400, "OutOfRangeInput")  # names are 3-63 long


def test_azure_is_reached_through_the_development_accounts_connection_string(azurite: Azurite) -> None:
    fields = dict(part.split("=", 1) for part in azurite.env()["AZURE_STORAGE_CONNECTION_STRING"].split(";") if part)
    assert fields == {"DefaultEndpointsProtocol": "http", "AccountName": ACCOUNT, "AccountKey": ACCOUNT_KEY,
                      "BlobEndpoint": azurite.endpoint}  # fmt: skip
    assert azurite.endpoint.startswith("http://127.0.0.1:") and azurite.endpoint.endswith(f"/{ACCOUNT}")


# --- Both ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow  # starts its own servers
def test_a_stopped_emulator_leaves_nothing_behind(tmp_path: Path) -> None:
    for server in (FakeGCS.start(parent=tmp_path), Azurite.start(parent=tmp_path)):
        assert server.data_dir.parent == tmp_path and server.process.poll() is None
        server.stop()
        assert server.process.poll() is not None and not server.data_dir.exists()
        with pytest.raises(ProcessLookupError):
            os.killpg(server.process.pid, 0)  # nothing of its session is left running
    assert list(tmp_path.iterdir()) == []
