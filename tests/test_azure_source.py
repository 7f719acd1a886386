"""The az:// source: its URIs, settings and SharedKey signing as pure logic, then the real programs against Azurite
(Microsoft's emulator, SharedKey enforced), directly or through a relay that injects Azure's throttling."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import signal
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from test_emulators import flip_stored_byte
from test_reliability import wait_until

from devkit.azurite import (
    ACCOUNT,
    ACCOUNT_KEY,
    Azurite,
    IdentityEndpoint,
    _signature,
    account_sas,
    client_certificate,
    connection_string,
)
from devkit.outputs import manifest, tree
from devkit.programs import ProgramResult, run_program, start_program, wait_for_event
from devkit.relay import CorruptFault, Relay, ResetFault, StatusFault
from devkit.samples import ODD_NAMES
from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.config.uris import scheme_of
from initializers.destination.partials import RECORD_SUFFIX, read_partial
from initializers.sources import DATASET, MODEL
from initializers.sources.azure.access import SasToken, Unsigned, access_from
from initializers.sources.azure.connection_string import parse_connection_string
from initializers.sources.azure.entra import REFRESH_BEFORE_SECONDS, EntraToken
from initializers.sources.azure.listing import ListPage, PageChain, parse_page
from initializers.sources.azure.location import AzureLocation
from initializers.sources.azure.options import AzureOptions
from initializers.sources.azure.range_md5 import HashedAnswer, checked_of
from initializers.sources.azure.sharedkey import SharedKey, string_to_sign
from initializers.store.contract import MAX_EMPTY_PAGES

#: A storage account key that is not the development account's (base64, as keys are).
WRONG_KEY = base64.b64encode(b"not the development account's key, 64 bytes long, as keys are!!").decode()

# --- URIs ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "container", "name", "account"),
    [
        ("az://data", "data", "", None),
        ("az://data/train/part-0.jsonl", "data", "train/part-0.jsonl", None),
        ("AZ://my-container-01/a b/#c", "my-container-01", "a b/#c", None),
        ("az://$root/x", "$root", "x", None),
        ("https://acct01.blob.core.windows.net/models", "models", "", "acct01"),
        ("https://acct01.blob.core.windows.net/models/bert/a%20b%23c.txt", "models", "bert/a b#c.txt", "acct01"),
        ("https://ACCT01.blob.core.windows.net/models/bert/", "models", "bert/", "acct01"),
    ],
)
def test_uris_name_a_container_and_a_name_in_it(uri: str, container: str, name: str, account: str | None):
    location = AzureLocation.parse(uri)
    assert (location.container, location.name, location.account) == (container, name, account)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("az://", "'az://' names no container; expected az://CONTAINER[/PREFIX]"),
        ("az:///x", "names no container"),
        ("az://ab/x", "'ab' is not a container name Azure accepts (3 to 63 lowercase letters, digits and single"),
        ("az://Models/x", "'Models' is not a container name Azure accepts"),
        ("az://a--b/x", "'a--b' is not a container name"),
        ("az://-ab/x", "'-ab' is not a container name"),
        ("az://under_score", "'under_score' is not a container name"),
        ("az://" + "c" * 64, "is not a container name"),
        ("https://acct01.blob.core.windows.net/", "names no container; expected https://ACCOUNT.blob.core.windows"),
        ("https://acct01.blob.core.windows.net/box/x?sv=1&sig=s3cr3t", "carries a query or a fragment: give a SAS"),
        ("https://a_b.blob.core.windows.net/box", "names no storage account Azure would accept"),
        ("https://acct01.blob.core.windows.net:8443/c", "names no storage account Azure would accept"),
    ],
)
def test_a_malformed_uri_is_refused_saying_what_is_wrong(uri: str, message: str):
    with pytest.raises(ConfigError) as refused:
        AzureLocation.parse(uri)
    assert str(refused.value).startswith("STORAGE_URI: ") and message in str(refused.value)
    assert "s3cr3t" not in str(refused.value)


def test_a_prefix_is_a_folder_and_uris_are_named_as_given():
    assert AzureLocation.parse("az://box/data").folder_prefix == "data/"
    assert AzureLocation.parse("az://box/data/").folder_prefix == "data/"
    assert AzureLocation.parse("az://box").folder_prefix == ""
    url = AzureLocation.parse("https://acct01.blob.core.windows.net/box/a%20b")
    assert str(url) == "https://acct01.blob.core.windows.net/box/a%20b" and url.uri_of("x#y") == (
        "https://acct01.blob.core.windows.net/box/x%23y"
    )
    assert AzureLocation.parse("az://box/a b").uri_of("a b/c") == "az://box/a b/c"


@pytest.mark.parametrize("kind", [MODEL, DATASET])
def test_both_programs_take_a_containers_url_as_kserve_writes_it(kind):
    assert scheme_of("https://acct01.blob.core.windows.net/models/bert", kind) == "az"
    assert scheme_of("az://models/bert", kind) == "az"
    assert scheme_of("https://example.com/x", kind) == "https"  # no blob host: the web store's (issue 69)


# --- Settings --------------------------------------------------------------------------------------------------------


def test_a_connection_strings_blob_endpoint_wins_and_its_keys_are_read_in_any_case():
    parsed = parse_connection_string(
        "defaultendpointsprotocol=https;ACCOUNTNAME=acct01;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn;"
        "BlobEndpoint=http://127.0.0.1:10000/acct01/;"
    )
    assert (parsed.endpoint, parsed.account, parsed.key, parsed.sas) == (
        "http://127.0.0.1:10000/acct01", "acct01", "a2V5", None
    )  # fmt: skip
    assert "a2V5" not in repr(parsed)
    built = parse_connection_string(
        "AccountName=acct01;EndpointSuffix=core.chinacloudapi.cn;SharedAccessSignature=sv=1&sig=x"
    )
    assert (built.endpoint, built.sas) == ("https://acct01.blob.core.chinacloudapi.cn", "sv=1&sig=x")
    assert parse_connection_string("AccountName=acct01").endpoint == "https://acct01.blob.core.windows.net"
    development = parse_connection_string("UseDevelopmentStorage=true")
    assert (development.endpoint, development.account, development.key) == (
        f"http://127.0.0.1:10000/{ACCOUNT}", ACCOUNT, ACCOUNT_KEY
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("AccountKey=a2V5", "names neither a blob endpoint nor an account name"),
        ("AccountName=acct01;justtext", "a part is not of the form name=value"),
        (
            "AccountName=acct01;AccountKey=a2V5;SharedAccessSignature=sig=x",
            "both an account key and a shared access signature",
        ),
    ],
)
def test_a_connection_string_that_says_nothing_usable_is_refused_without_its_value(text: str, message: str):
    with pytest.raises(ConfigError) as refused:
        parse_connection_string(text)
    assert str(refused.value).startswith("AZURE_STORAGE_CONNECTION_STRING: ") and message in str(refused.value)
    assert "a2V5" not in str(refused.value)


def config(anonymous: bool = False, **options: str) -> Config:
    return Config(source_options=(AzureOptions(**options), AnonymousAccess(anonymous)))


@pytest.mark.parametrize(
    ("uri", "settings", "message"),
    [
        ("az://box", {"account_key": ACCOUNT_KEY, "sas_token": "sv=1&sig=x", "account": "acct01"},
         "AZURE_STORAGE_KEY and AZURE_STORAGE_SAS_TOKEN are both set: give one credential"),
        ("az://box", {"connection_string": f"AccountName=acct01;AccountKey={ACCOUNT_KEY}", "sas_token": "sig=x"},
         "the account key in AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_SAS_TOKEN are both set"),
        ("az://box", {"connection_string": "AccountName=acct01;SharedAccessSignature=sig=x", "account_key": "a2V5"},
         "the shared access signature in AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_KEY are both set"),
        ("az://box", {"anonymous": True, "account": "acct01", "sas_token": "sig=x"},
         "ANONYMOUS=true conflicts with AZURE_STORAGE_SAS_TOKEN"),
        ("az://box", {"connection_string": "AccountName=acct01", "account": "acct02"},
         "the account name in AZURE_STORAGE_CONNECTION_STRING names the account 'acct01', AZURE_STORAGE_ACCOUNT"),
        ("https://acct01.blob.core.windows.net/box", {"account": "acct02"},
         "STORAGE_URI's host names the account 'acct01', AZURE_STORAGE_ACCOUNT 'acct02': they conflict"),
        ("https://acct01.blob.core.windows.net/box", {"connection_string": "AccountName=acct01;BlobEndpoint=http://h/x"},
         "STORAGE_URI names the account's endpoint acct01.blob.core.windows.net, but AZURE_STORAGE_CONNECTION_STRING"),
        ("az://box", {}, "STORAGE_URI: 'az://box' names no storage account: set AZURE_STORAGE_ACCOUNT or"),
        ("az://box", {"account": "Not_An_Account"}, "AZURE_STORAGE_ACCOUNT: 'Not_An_Account' is not a storage account"),
        ("az://box", {"connection_string": "BlobEndpoint=http://h/x", "account_key": ACCOUNT_KEY},
         "AZURE_STORAGE_KEY: a key signs for a named account: set AZURE_STORAGE_ACCOUNT"),
        ("az://box", {"account": "acct01", "account_key": "not base64!"}, "AZURE_STORAGE_KEY: not a storage account"),
        ("az://box", {"account": "acct01", "sas_token": "sv=1&sp=r"}, "AZURE_STORAGE_SAS_TOKEN: not a SAS token"),
        ("az://box", {"connection_string": "BlobEndpoint=ftp://h/x"}, "its blob endpoint is not an http:// or https://"),
    ],
)  # fmt: skip
def test_settings_that_conflict_or_fall_short_are_refused_naming_them(uri: str, settings: dict[str, Any], message):
    anonymous = settings.pop("anonymous", False)
    with pytest.raises(ConfigError) as refused:
        access_from(AzureLocation.parse(uri), config(anonymous, **settings))
    assert message in str(refused.value)
    assert ACCOUNT_KEY not in str(refused.value) and "sig=x" not in str(refused.value)


def test_the_credential_is_the_one_given_or_a_token_and_secrets_from_a_connection_string_are_hidden():
    url = AzureLocation.parse("https://acct01.blob.core.windows.net/box")
    assert isinstance(access_from(url, config()).credential, EntraToken)  # azure-identity not imported yet
    assert isinstance(access_from(url, config(anonymous=True)).credential, Unsigned)
    access = access_from(url, config(account_key=ACCOUNT_KEY))
    assert isinstance(access.credential, SharedKey) and str(access.endpoint) == "https://acct01.blob.core.windows.net"
    where = "BlobEndpoint=http://127.0.0.1:1/acct01;AccountName=acct01"
    sas = access_from(AzureLocation.parse("az://box"), config(connection_string=where, sas_token="?sv=1&sig=abc"))
    assert isinstance(sas.credential, SasToken) and sas.credential.authorize("/", {}, {}) == "sv=1&sig=abc"
    assert str(sas.endpoint) == "http://127.0.0.1:1/acct01" and sas.account == "acct01"
    key = base64.b64encode(b"a key given only inside a connection string").decode()
    access_from(AzureLocation.parse("az://box"), config(connection_string=f"{where};AccountKey={key}"))
    assert logs.redact(f"the key {key}.") == "the key ***."


# --- SharedKey -------------------------------------------------------------------------------------------------------


def test_sharedkey_signs_azures_canonical_string():
    headers = {"x-ms-version": "2024-11-04", "x-ms-date": "Mon, 07 Dec 2026 04:34:05 GMT", "if-match": '"0x1"',
               "x-ms-range": "bytes=0-9", "X-Ms-Client-Request-Id": " a b ", "user-agent": "unsigned"}  # fmt: skip
    text = string_to_sign("GET", ACCOUNT, f"/{ACCOUNT}/c/a%20b", {"comp": "list", "prefix": "a b/"}, headers)
    assert text.split("\n") == [
        "GET", "", "", "", "", "", "", "", '"0x1"', "", "", "",  # the standard headers: If-Match alone given
        "x-ms-client-request-id:a b", "x-ms-date:Mon, 07 Dec 2026 04:34:05 GMT", "x-ms-range:bytes=0-9",
        "x-ms-version:2024-11-04", f"/{ACCOUNT}/{ACCOUNT}/c/a%20b", "comp:list", "prefix:a b/",
    ]  # fmt: skip
    # The same signature as the emulator's test-side signer makes, which Azurite accepts (tests/test_emulators.py).
    signed = {name: value for name, value in headers.items() if name != "x-ms-date"}
    SharedKey(ACCOUNT, ACCOUNT_KEY, "AZURE_STORAGE_KEY").authorize(f"/{ACCOUNT}/c/a%20b", {"comp": "list"}, signed)
    expected = _signature("GET", f"/{ACCOUNT}/c/a%20b", signed, {"comp": "list"}, ACCOUNT_KEY)
    assert signed["authorization"] == f"SharedKey {ACCOUNT}:{expected}"
    assert ACCOUNT_KEY not in repr(SharedKey(ACCOUNT, ACCOUNT_KEY, "AZURE_STORAGE_KEY"))


# --- Microsoft Entra tokens ------------------------------------------------------------------------------------------


class _Token:
    def __init__(self, token: str, expires_on: float) -> None:
        self.token, self.expires_on = token, expires_on


class _Credential:
    """azure-identity's side: a new token for each call, living `lifetime` seconds from the clock's now."""

    def __init__(self, clock: list[float], lifetime: float) -> None:
        self.clock, self.lifetime, self.calls = clock, lifetime, []

    def get_token(self, scope: str) -> _Token:
        self.calls.append(scope)
        return _Token(f"eyJ0eXAi.token-{len(self.calls)}-Xy9Zq", self.clock[0] + self.lifetime)


def test_an_entra_token_is_kept_until_shortly_before_it_expires_then_fetched_again_and_never_shown():
    now = [1000.0]
    credential = _Credential(now, lifetime=3600)
    token = EntraToken(credential, clock=lambda: now[0])
    headers: dict[str, str] = {}
    assert token.authorize("/c", {}, headers) == "" and headers["authorization"] == "Bearer eyJ0eXAi.token-1-Xy9Zq"
    now[0] += 3600 - REFRESH_BEFORE_SECONDS - 1
    assert token.current() == "eyJ0eXAi.token-1-Xy9Zq" and len(credential.calls) == 1
    now[0] += 2  # within the margin: the next request gets a new one
    assert token.current() == "eyJ0eXAi.token-2-Xy9Zq"
    assert credential.calls == ["https://storage.azure.com/.default"] * 2
    assert logs.redact("Bearer eyJ0eXAi.token-2-Xy9Zq") == "Bearer ***"


def test_a_token_refused_by_azure_identity_fails_the_run_naming_what_to_check():
    from azure.core.exceptions import ClientAuthenticationError

    class Refusing:
        def get_token(self, scope: str) -> Any:
            raise ClientAuthenticationError("AADSTS700024: Client assertion is not within its valid time range.")

    with pytest.raises(FetchError) as failed:
        EntraToken(Refusing()).current()
    assert "getting a Microsoft Entra token for Azure Storage failed: AADSTS700024" in str(failed.value)
    assert "AZURE_FEDERATED_TOKEN_FILE" in str(failed.value)


# --- Listing pages ---------------------------------------------------------------------------------------------------


def test_a_page_gives_names_as_stored_md5s_as_hex_and_folders_apart():
    body = (
        b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ContainerName="c"><Blobs>'
        b'<Blob><Name>a &amp; b </Name><Properties><Content-Length>3</Content-Length><Etag>"0x1"</Etag>'
        b"<Content-MD5>kAFQmDzST7DWlj99KOF/cg==</Content-MD5><AccessTier>Hot</AccessTier></Properties></Blob>"
        b'<Blob><Name Encoded="true">bad%EF%BF%BEname</Name><Properties><Content-Length>0</Content-Length>'
        b"<Etag>0x2</Etag><Content-MD5 /></Properties></Blob>"
        b"<Blob><Name>dir</Name><Properties><Content-Length>0</Content-Length><Etag>0x3</Etag>"
        b"<ResourceType>directory</ResourceType><AccessTier>Archive</AccessTier></Properties></Blob>"
        b"</Blobs><NextMarker>2!abc</NextMarker></EnumerationResults>"
    )
    page = parse_page(body)
    assert page.next_marker == "2!abc"
    first, second, third = page.blobs
    assert (first.name, first.size, first.etag, first.md5) == ("a & b ", 3, "0x1", hashlib.md5(b"abc").hexdigest())
    assert (second.name, second.md5, second.directory) == ("bad\ufffename", None, False)
    assert third.directory and third.archived
    with pytest.raises(ValueError, match="a Content-MD5 that is no MD5"):
        parse_page(body.replace(b"kAFQmDzST7DWlj99KOF/cg==", b"AAAA"))
    with pytest.raises(ValueError, match="not an <EnumerationResults>"):
        parse_page(b"<Error><Code>x</Code></Error>")


def test_a_listing_that_would_never_end_is_stopped():
    blob = parse_page(
        b"<EnumerationResults><Blobs><Blob><Name>a</Name><Properties><Content-Length>1</Content-Length>"
        b"<Etag>0x1</Etag></Properties></Blob></Blobs></EnumerationResults>"
    ).blobs[0]
    chain = PageChain()
    chain.follow(ListPage([blob], "m1"))
    with pytest.raises(ValueError, match="repeated the NextMarker"):
        chain.follow(ListPage([blob._replace(name="b")], "m1"))
    again = PageChain()
    again.follow(ListPage([blob], "x"))
    with pytest.raises(ValueError, match=re.escape("listed 'a' .. 'a' again")):
        again.follow(ListPage([blob], "y"))
    empty = PageChain()
    for number in range(MAX_EMPTY_PAGES - 1):
        empty.follow(ListPage([], f"e{number}"))
    with pytest.raises(ValueError, match=f"{MAX_EMPTY_PAGES} pages in a row listed nothing"):
        empty.follow(ListPage([], "last"))


# --- The programs against Azurite ------------------------------------------------------------------------------------


@pytest.fixture
def container(request: pytest.FixtureRequest, azurite: Azurite) -> str:
    """A fresh container per test, named after it (3 to 63 lowercase letters, digits and single hyphens)."""
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    readable = "-".join(
        part for part in "".join(c if c.isalnum() else "-" for c in request.node.name.lower()).split("-") if part
    )
    name = f"{readable[:50].strip('-')}-{digest}"
    azurite.create_container(name)
    return name


def put_all(azurite: Azurite, container: str, blobs: dict[str, bytes]) -> None:
    for name, body in blobs.items():
        azurite.put_blob(container, name, body)


def fetch(azurite: Azurite, uri: str, output: Path, kind: str = "dataset", **extra: str) -> ProgramResult:
    return run_program(kind, {**azurite.env(), "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra})


def ok(result: ProgramResult) -> None:
    assert result.code == 0, result.stdout + result.stderr
    assert result.last["event"] == "done", result.last


def test_a_prefix_of_nested_and_odd_names_lands_relative_to_it(azurite: Azurite, container: str, tmp_path: Path):
    put_all(azurite, container, {f"data/{name}": body for name, body in ODD_NAMES.items()})
    put_all(azurite, container, {"data-old/no.txt": b"no", "database.txt": b"no", "data/": b""})  # and a folder marker
    result = fetch(azurite, f"az://{container}/data", tmp_path / "out")
    ok(result)
    assert tree(tmp_path / "out") == ODD_NAMES
    recorded = manifest(tmp_path / "out")
    assert recorded["source"]["uri"] == f"az://{container}/data"
    assert result.last["files"] == len(ODD_NAMES)


def test_a_uri_naming_one_blob_fetches_that_blob(azurite: Azurite, container: str, tmp_path: Path):
    body = os.urandom(5000)
    put_all(azurite, container, {"models/bert/model.safetensors": body, "models/bert/config.json": b"{}",
                                 "models/bert/model.safetensors.index.json": b"{}"})  # fmt: skip
    result = fetch(azurite, f"az://{container}/models/bert/model.safetensors", tmp_path / "out", kind="model")
    ok(result)
    assert tree(tmp_path / "out") == {"model.safetensors": body}
    partial = fetch(azurite, f"az://{container}/models/bert/model", tmp_path / "none", kind="model")
    assert partial.code == 1 and "has no files" in partial.last["error"], partial.last


def test_a_large_blob_comes_in_ranges_verified_against_its_md5(azurite: Azurite, container: str, tmp_path: Path):
    big = random.Random(58).randbytes(20 * 1024 * 1024 + 777)
    azurite.put_blob(container, "weights/big.bin", big)
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}")}
        result = fetch(azurite, f"az://{container}/weights", tmp_path / "out", **env)
    ok(result)
    assert (tmp_path / "out" / "big.bin").read_bytes() == big
    ranged = [headers["x-ms-range"] for headers in relay.traffic.headers if "x-ms-range" in headers]
    assert len(ranged) >= 3 and all(h.get("if-match") for h in relay.traffic.headers if "x-ms-range" in h)
    (entry,) = manifest(tmp_path / "out")["files"]
    assert entry["checksum"] == {"algorithm": "md5", "hexdigest": hashlib.md5(big).hexdigest()}


def test_the_manifest_records_md5_for_blobs_put_whole_and_size_and_version_for_blocks(
    azurite: Azurite, container: str, tmp_path: Path
):
    azurite.put_blob(container, "put.bin", b"put in one request")
    azurite.put_blocks(container, "blocks.bin", [b"first block|", b"second block"])
    ok(fetch(azurite, f"az://{container}", tmp_path / "out"))
    assert tree(tmp_path / "out") == {"put.bin": b"put in one request", "blocks.bin": b"first block|second block"}
    entries = {entry["path"]: entry for entry in manifest(tmp_path / "out")["files"]}
    put, blocks = entries["put.bin"], entries["blocks.bin"]
    assert put["checksum"] == {"algorithm": "md5", "hexdigest": hashlib.md5(b"put in one request").hexdigest()}
    assert "checksum" not in blocks and blocks["verified"] == "size+version" and blocks["version"].startswith("0x")


def test_a_blob_committed_from_blocks_comes_in_answers_each_checked_against_azures_md5_of_it(
    azurite: Azurite, container: str, tmp_path: Path
):
    big = random.Random(59).randbytes(10 * 1024 * 1024 + 5)
    azurite.put_blocks(container, "weights/big.bin", [big[: 6 << 20], big[6 << 20 :]])
    azurite.put_blocks(container, "small.json", [b'{"a": ', b"1}"])
    azurite.put_blob(container, "put.bin", b"put whole: Azure keeps its MD5")
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}")}
        ok(fetch(azurite, f"az://{container}", tmp_path / "out", **env))
    assert tree(tmp_path / "out") == {
        "weights/big.bin": big, "small.json": b'{"a": 1}', "put.bin": b"put whole: Azure keeps its MD5"
    }  # fmt: skip
    traffic = zip(relay.traffic.requests, relay.traffic.headers, strict=True)
    reads = [(path, headers) for (method, path), headers in traffic if method == "GET" and "comp=list" not in path]
    answers = [h for path, h in reads if "weights/big.bin" in path]
    spans = sorted(tuple(map(int, h["x-ms-range"].removeprefix("bytes=").split("-"))) for h in answers)
    assert spans[0][0] == 0 and spans[-1][1] == len(big) - 1 and len(spans) >= 3
    assert all(end + 1 - start <= 4 << 20 for start, end in spans)
    assert all(h.get("x-ms-range-get-content-md5") == "true" and h.get("if-match") for h in answers)
    (small,) = [h for path, h in reads if "small.json" in path]
    assert small.get("x-ms-range-get-content-md5") == "true" and small["x-ms-range"] == "bytes=0-7"
    (put,) = [h for path, h in reads if "put.bin" in path]
    assert "x-ms-range-get-content-md5" not in put  # its own MD5 vouches for it, whole
    entries = {entry["path"]: entry for entry in manifest(tmp_path / "out")["files"]}
    assert entries["weights/big.bin"]["verified"] == "size+version" and "checksum" in entries["put.bin"]


@pytest.mark.parametrize("name", ["weights/big.bin", "small.json"], ids=["ranges", "whole"])
def test_bytes_that_keep_missing_azures_md5_of_them_fail_the_run_naming_the_blob(
    azurite: Azurite, container: str, tmp_path: Path, name: str
):
    body = random.Random(60).randbytes(5 * 1024 * 1024 if name.endswith(".bin") else 3000)
    azurite.put_blocks(container, name, [body[:1000], body[1000:]])
    azurite.put_blob(container, "config.json", b"{}")
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        relay.add_fault(CorruptFault(match=f"{container}/{name}", times=None))
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}")}
        result = fetch(azurite, f"az://{container}", tmp_path / "out", **env)
    assert result.code == 1 and name in result.last["error"], result.last
    assert "do not match the MD5 Azure sent" in result.last["error"], result.last
    assert not (tmp_path / "out" / name).exists()
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


@pytest.mark.parametrize(("size", "cut_at"), [(6 << 20, 1_000_000), (3000, 1000)], ids=["ranges", "whole"])
def test_bytes_of_an_answer_cut_short_are_never_kept_unchecked(
    azurite: Azurite, container: str, tmp_path: Path, size: int, cut_at: int
):
    """A connection reset inside a hashed answer: the bytes it brought were never checked against its MD5, so the
    request after it starts where an answer starts, not where the bytes stopped."""
    body = random.Random(61).randbytes(size)
    azurite.put_blocks(container, "blob.bin", [body[: size // 2], body[size // 2 :]])
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        reset = relay.add_fault(ResetFault(match=f"{container}/blob.bin", after_bytes=cut_at, times=1))
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}")}
        ok(fetch(azurite, f"az://{container}", tmp_path / "out", **env))
    assert reset.hits == 1 and tree(tmp_path / "out") == {"blob.bin": body}
    traffic = zip(relay.traffic.requests, relay.traffic.headers, strict=True)
    starts = [
        int(h["x-ms-range"].removeprefix("bytes=").split("-")[0]) for (_m, path), h in traffic if "blob.bin" in path
    ]
    assert starts.count(0) == 2 and all(start % (4 << 20) == 0 for start in starts), starts


def test_a_run_killed_inside_hashed_answers_is_resumed_from_where_checked_answers_ended(
    azurite: Azurite, container: str, tmp_path: Path
):
    """SIGKILL while answers stream: the partial's record runs about a second behind, at any byte; the next run keeps
    only what ends where a checked answer ended (every 4 MiB of the blob) and asks for the rest from there."""
    size = 24 << 20
    body = random.Random(62).randbytes(size)
    azurite.put_blocks(container, "big.bin", [body[: 10 << 20], body[10 << 20 :]])
    output = tmp_path / "out"
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        env = {**azurite.env(), "AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}"),
               "STORAGE_URI": f"az://{container}", "OUTPUT_PATH": str(output), "MAX_WORKERS": "2"}  # fmt: skip
        relay.bytes_per_second = 2 << 20
        process = start_program("dataset", env)
        wait_for_event(process, "fetching")
        wait_until(lambda: relay.traffic.body_bytes > size * 0.6, timeout=60)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        (record,) = (output / ".initializer" / "tmp").glob(f"*{RECORD_SUFFIX}")
        kept = read_partial(record.read_bytes()).kept
        assert any((offset + length) % (4 << 20) for offset, length in kept), kept  # the record ends mid-answer
        relay.reset()
        relay.bytes_per_second = None
        result = run_program("dataset", env)
    ok(result)
    assert (output / "big.bin").read_bytes() == body
    traffic = zip(relay.traffic.requests, relay.traffic.headers, strict=True)
    starts = [
        int(h["x-ms-range"].removeprefix("bytes=").split("-")[0]) for (_m, path), h in traffic if "big.bin" in path
    ]
    assert starts and all(start % (4 << 20) == 0 for start in starts), starts
    assert result.last["kept_bytes"] == sum(length for _offset, length in checked_of(kept, size)) > 0


def test_what_an_earlier_run_kept_counts_up_to_where_a_checked_answer_ended():
    mib = 1 << 20
    kept = ((0, 5 * mib + 7), (8 * mib, 4 * mib), (16 * mib, 2 * mib), (20 * mib, 3 * mib + 5))
    assert checked_of(kept, 23 * mib + 5) == ((0, 4 * mib), (8 * mib, 4 * mib), (20 * mib, 3 * mib + 5))
    assert checked_of(((1000, 3 * mib),), 30 * mib) == ()


def test_an_answer_without_the_md5_asked_for_is_refused_naming_the_blob():
    class Answer:
        def __init__(self, value: str | None) -> None:
            self.value = value

        def header(self, name: str) -> str | None:
            return self.value if name == "content-md5" else None

    class Kept:
        written = 0

    for value, shown in [(None, "none"), ("not base64!", "'not base64!'"), (base64.b64encode(b"short").decode(), "'")]:
        hashed = HashedAnswer(Kept(), 100, "az://c/blob")  # type: ignore[arg-type]
        with pytest.raises(FetchError, match=r"az://c/blob: bytes 0-99 were asked for with their MD5") as refused:
            hashed.head(Answer(value), 0)  # type: ignore[arg-type]
        assert f"Content-MD5 is {shown}" in str(refused.value)


def test_a_byte_flipped_in_the_stored_copy_fails_the_run(azurite: Azurite, container: str, tmp_path: Path):
    body = random.Random(4).randbytes(300 * 1024)
    put_all(azurite, container, {"weights/target.bin": body, "config.json": b"{}"})
    flip_stored_byte(azurite, body, 1000)
    result = fetch(azurite, f"az://{container}", tmp_path / "out")
    assert result.code == 1 and "weights/target.bin" in result.last["error"], result.last
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()
    assert not (tmp_path / "out" / "weights" / "target.bin").exists()


def test_a_missing_container_fails_naming_it(azurite: Azurite, tmp_path: Path):
    result = fetch(azurite, "az://no-such-container/data", tmp_path / "out")
    assert result.code == 1, result.last
    assert result.last["error"] == "the container az://no-such-container does not exist (ContainerNotFound)"


def test_a_wrong_key_fails_naming_the_variable_and_never_shows_the_key(
    azurite: Azurite, container: str, tmp_path: Path
):
    azurite.put_blob(container, "a.txt", b"a")
    env = {
        "AZURE_STORAGE_CONNECTION_STRING": connection_string(azurite.endpoint, key=None),
        "AZURE_STORAGE_KEY": WRONG_KEY,
    }
    result = fetch(azurite, f"az://{container}", tmp_path / "out", LOG_LEVEL="debug", **env)
    assert result.code == 1, result.last
    assert result.last["error"].startswith(f"Azure denied listing az://{container}: 403 AuthorizationFailure; check ")
    assert result.last["error"].endswith("check AZURE_STORAGE_KEY")
    assert WRONG_KEY not in result.stdout + result.stderr
    # The same key inside a connection string is named as such.
    env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(azurite.endpoint, key=WRONG_KEY)}
    result = fetch(azurite, f"az://{container}", tmp_path / "again", **env)
    assert result.code == 1 and result.last["error"].endswith(
        "check the account key in AZURE_STORAGE_CONNECTION_STRING"
    )
    assert WRONG_KEY not in result.stdout + result.stderr


def test_the_account_and_its_key_sign_when_the_connection_string_only_says_where(
    azurite: Azurite, container: str, tmp_path: Path
):
    azurite.put_blob(container, "a.txt", b"a")
    env = {"AZURE_STORAGE_CONNECTION_STRING": f"BlobEndpoint={azurite.endpoint}", "AZURE_STORAGE_ACCOUNT": ACCOUNT,
           "AZURE_STORAGE_KEY": ACCOUNT_KEY}  # fmt: skip
    ok(run_program("dataset", {**env, "STORAGE_URI": f"az://{container}", "OUTPUT_PATH": str(tmp_path / "out")}))
    assert tree(tmp_path / "out") == {"a.txt": b"a"}


def test_a_sas_token_reads_and_an_expired_one_fails_naming_the_variable(
    azurite: Azurite, container: str, tmp_path: Path
):
    put_all(azurite, container, {"d/a.txt": b"a", "d/b/c.txt": b"c"})
    where = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(azurite.endpoint, key=None)}
    token = account_sas()
    result = fetch(azurite, f"az://{container}/d", tmp_path / "out", LOG_LEVEL="debug", AZURE_STORAGE_SAS_TOKEN=token,
                   **where)  # fmt: skip
    ok(result)
    assert tree(tmp_path / "out") == {"a.txt": b"a", "b/c.txt": b"c"}
    signature = token.rsplit("sig=", 1)[1]
    assert signature not in result.stdout + result.stderr
    expired = account_sas(expiry="2001-01-01T00:00:00Z")
    failed = fetch(azurite, f"az://{container}/d", tmp_path / "no", AZURE_STORAGE_SAS_TOKEN=expired, **where)
    assert failed.code == 1, failed.last
    assert failed.last["error"].startswith(f"Azure denied listing az://{container}/d/: 403 ")
    assert "check AZURE_STORAGE_SAS_TOKEN (its expiry, and its permissions: read and list)" in failed.last["error"]
    assert expired.rsplit("sig=", 1)[1] not in failed.stdout + failed.stderr
    # A SAS inside the connection string works alike.
    inside = connection_string(azurite.endpoint, key=None) + f"SharedAccessSignature={token};"
    ok(fetch(azurite, f"az://{container}/d", tmp_path / "inside", AZURE_STORAGE_CONNECTION_STRING=inside))


def test_a_sas_token_or_key_a_server_echoes_is_hidden_in_every_log_line(
    azurite: Azurite, container: str, tmp_path: Path
):
    """A proxy or a server may quote a request's query or credential in its error: whatever a message quotes, the
    SAS token and the key (here the one inside a connection string) show as ***."""
    token = account_sas()
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        where = f"{relay.endpoint}/{ACCOUNT}"
        runs = {token: {"AZURE_STORAGE_CONNECTION_STRING": connection_string(where, key=None),
                        "AZURE_STORAGE_SAS_TOKEN": token},
                ACCOUNT_KEY: {"AZURE_STORAGE_CONNECTION_STRING": connection_string(where)}}  # fmt: skip
        for secret, env in runs.items():
            echo = f"<Error><Code>InvalidQueryParameterValue</Code><Message>{secret} is not accepted</Message></Error>"
            relay.add_fault(StatusFault(status=400, times=1, match="comp=list", body=echo.encode()))
            result = fetch(azurite, f"az://{container}", tmp_path / "out", LOG_LEVEL="debug", **env)
            said = f"400 InvalidQueryParameterValue for az://{container}: *** is not accepted"
            assert result.code == 1 and result.last["error"].endswith(said), result.last
            pieces = (secret, *urllib.parse.parse_qs(secret).get("sig", []))
            assert not any(piece in result.stdout + result.stderr for piece in pieces)


def test_a_public_container_is_read_anonymously_and_a_private_one_is_refused(
    azurite: Azurite, container: str, tmp_path: Path
):
    azurite.put_blob(container, "a.txt", b"a")
    where = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(azurite.endpoint, key=None), "ANONYMOUS": "true"}
    refused = fetch(azurite, f"az://{container}", tmp_path / "no", **where)
    assert refused.code == 1 and "check that the container allows anonymous read access" in refused.last["error"]
    azurite.make_public(container)
    ok(fetch(azurite, f"az://{container}", tmp_path / "out", **where))
    assert tree(tmp_path / "out") == {"a.txt": b"a"}


@pytest.mark.parametrize(
    ("uri", "extra", "message"),
    [
        ("az://Bad_Name/x", {}, "STORAGE_URI: 'Bad_Name' is not a container name Azure accepts"),
        ("az://", {}, "STORAGE_URI: 'az://' names no container"),
        ("az://c-1/x", {"AZURE_STORAGE_SAS_TOKEN": "sv=1&sig=x"},
         "the account key in AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_SAS_TOKEN are both set"),
    ],
)  # fmt: skip
def test_a_malformed_uri_or_conflicting_settings_exit_2(azurite: Azurite, tmp_path: Path, uri, extra, message):
    result = fetch(azurite, uri, tmp_path / "out", **extra)
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.last["error"]
    assert not (tmp_path / "out").exists()


def test_azures_throttling_is_waited_out(azurite: Azurite, container: str, tmp_path: Path):
    files = {"small/a.json": b"{}", "weights/target.bin": os.urandom(256 * 1024)}
    put_all(azurite, container, files)
    busy = b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Busy.</Message></Error>'
    with Relay(azurite.endpoint.rsplit("/", 1)[0]) as relay:
        faults = [
            relay.add_fault(StatusFault(status=503, times=3, match=match, body=busy,
                                        headers={"x-ms-error-code": "ServerBusy"}))
            for match in (f"{container}/weights/target.bin", "comp=list")
        ]  # fmt: skip
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{relay.endpoint}/{ACCOUNT}")}
        result = fetch(azurite, f"az://{container}", tmp_path / "out", **env)
    ok(result)
    assert tree(tmp_path / "out") == files
    assert [fault.hits for fault in faults] == [3, 3]
    assert {wait["reason"] for wait in result.named("waiting to retry")} == {"503 ServerBusy"}


def test_the_model_programs_default_selection_applies_to_a_container(azurite: Azurite, container: str, tmp_path: Path):
    put_all(azurite, container, {"m/config.json": b"{}", "m/model.safetensors": b"weights", "m/pytorch_model.bin": b"w",
                                 "m/README.md": b"# m", "m/logs/train.log": b"log"})  # fmt: skip
    result = fetch(azurite, f"az://{container}/m", tmp_path / "out", kind="model")
    ok(result)
    assert set(tree(tmp_path / "out")) == {"config.json", "model.safetensors"}


def test_a_microsoft_entra_token_from_a_managed_identity_reads_and_a_refused_one_fails(tmp_path: Path):
    """azure-identity's chain finds the managed identity (IDENTITY_ENDPOINT, as App Service and Arc set it), its token
    goes to Azurite over HTTPS (bearer tokens need it), never into the logs; a token Azure refuses (another audience)
    fails the run naming where the identity comes from."""
    with Azurite.start(parent=tmp_path, oauth=True) as server, IdentityEndpoint() as identity:
        server.create_container("models")
        put_all(server, "models", {"m/config.json": b"{}", "m/weights.bin": os.urandom(300_000)})
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(server.endpoint, key=None),
               "SSL_CERT_FILE": str(server.certificate), "STORAGE_URI": "az://models/m", **identity.env()}  # fmt: skip
        result = run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "out"), "LOG_LEVEL": "debug"})
        ok(result)
        assert set(tree(tmp_path / "out")) == {"config.json", "weights.bin"}
        assert len(identity.issued) == 1 and identity.issued[0] not in result.stdout + result.stderr
        identity.audience = "https://management.azure.com"
        refused = run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "no")})
    assert refused.code == 1, refused.stdout + refused.stderr
    assert refused.last["error"].startswith("Azure denied listing az://models/m/: 403 AuthenticationFailed")
    assert "check the Microsoft Entra identity" in refused.last["error"]
    assert identity.issued[-1] not in refused.stdout + refused.stderr


def test_a_connection_strings_key_is_hidden_and_its_endpoint_shown_in_logs_and_manifest(
    azurite: Azurite, container: str, tmp_path: Path
):
    """Only the secret parts of a connection string (the key, a signature) are hidden: the endpoint and the account
    it names stay readable in the logs and the manifest, where a whole-string secret hid pieces of them."""
    azurite.put_blob(container, "a.txt", b"a")
    result = fetch(azurite, f"az://{container}", tmp_path / "out", LOG_LEVEL="debug")
    ok(result)
    source = manifest(tmp_path / "out")["source"]
    assert source == {"uri": f"az://{container}", "endpoint": azurite.endpoint, "account": ACCOUNT}
    assert "***" not in json.dumps(source)
    assert ACCOUNT_KEY not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("missing", "No such file or directory"),
        ("not a certificate", "Failed to deserialize certificate"),
        ("a password for a key not encrypted", "Password was given but private key is not encrypted"),
        ("an http authority", "is an invalid authority"),
        ("a tenant no Entra has", "Invalid tenant ID"),
    ],
)  # fmt: skip
def test_entra_settings_azure_identity_cannot_use_exit_2_naming_them(tmp_path: Path, case: str, said: str):
    """A service principal's certificate that is missing, not one, or given a password it does not take, an
    authority that is not https, a tenant ID no Entra has: azure-identity refuses them as its chain is made, which
    is exit 2 naming the variables to check, at once (never retried as a network failure, never an internal
    error), the output folder left as it was."""
    client_certificate(tmp_path / "principal.pem")
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    env = {"AZURE_TENANT_ID": "00000000-0000-0000-0000-0000000000aa", "AZURE_CLIENT_ID": "c1",
           "AZURE_CLIENT_CERTIFICATE_PATH": str(tmp_path / "principal.pem"), "AZURE_STORAGE_ACCOUNT": "acct",
           "STORAGE_URI": "az://ctr/d", "OUTPUT_PATH": str(tmp_path / "out")}  # fmt: skip
    env |= {
        "missing": {"AZURE_CLIENT_CERTIFICATE_PATH": str(tmp_path / "none.pem")},
        "not a certificate": {"AZURE_CLIENT_CERTIFICATE_PATH": str(tmp_path / "junk.pem")},
        "a password for a key not encrypted": {"AZURE_CLIENT_CERTIFICATE_PASSWORD": "Pa55word-Xq7"},
        "an http authority": {"AZURE_AUTHORITY_HOST": "http://127.0.0.1:9"},
        "a tenant no Entra has": {"AZURE_TENANT_ID": "a b/c"},
    }[case]
    result = run_program("dataset", env)
    assert result.code == 2, result.stdout + result.stderr
    error = result.last["error"]
    assert error.startswith("azure-identity refused its settings: ") and said in error, error
    assert "check AZURE_TENANT_ID, AZURE_AUTHORITY_HOST" in error and "AZURE_CLIENT_CERTIFICATE_PATH" in error
    assert not result.named("waiting to retry")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_over_tls_with_a_shared_key_the_server_is_trusted_through_ssl_cert_file_and_refused_without(tmp_path: Path):
    """Azurite over HTTPS with a certificate of its own and the account's shared key (as bench/clouds.py runs it): the
    blobs come over TLS when SSL_CERT_FILE names it; without it the run fails at once, naming it."""
    with Azurite.start(parent=tmp_path, tls=True) as server:
        assert server.endpoint.startswith("https://") and server.certificate is not None
        server.create_container("models")
        files = {"m/config.json": b"{}", "m/weights.bin": os.urandom(9_000_000)}
        put_all(server, "models", files)
        env = {**server.env(), "STORAGE_URI": "az://models/m"}
        ok(
            run_program(
                "dataset", {**env, "SSL_CERT_FILE": str(server.certificate), "OUTPUT_PATH": str(tmp_path / "out")}
            )
        )
        assert tree(tmp_path / "out") == {name.removeprefix("m/"): body for name, body in files.items()}
        refused = run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "refused")})
    assert refused.code == 1 and "SSL_CERT_FILE" in refused.last["error"], refused.stdout + refused.stderr
    assert not (tmp_path / "refused" / "weights.bin").exists()
