"""The relay itself, in front of the local Hub: what it passes through unchanged, and the faults tests script on it."""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import random
import select
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from huggingface_hub import hf_hub_download

from devkit.hubserver import HubServer
from devkit.relay import Relay, ResetFault, StallFault, StatusFault

pytestmark = pytest.mark.usefixtures("private_hf_client")

REPO = "org/files"
BLOB = random.Random(3).randbytes(1024 * 1024)  # not LFS: the Hub origin serves it itself
WEIGHTS = random.Random(4).randbytes(300_000)  # LFS by its suffix: redirected to the CDN
BLOB_PATH = f"/{REPO}/resolve/main/blob.dat"
CONFIG_PATH = f"/{REPO}/resolve/main/config.json"
WEIGHTS_PATH = f"/{REPO}/resolve/main/w.safetensors"
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(REPO, {"blob.dat": BLOB, "config.json": b'{"a": 1}\n', "w.safetensors": WEIGHTS})
        yield server


@pytest.fixture
def relay(hub: HubServer) -> Iterator[Relay]:
    hub.reset()
    with Relay(hub.endpoint) as relay:
        yield relay


def connect(endpoint: str, timeout: float = 10) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(urlsplit(endpoint).netloc, timeout=timeout)


def ask(
    connection: http.client.HTTPConnection, path: str, method: str = "GET"
) -> tuple[int, list[tuple[str, str]], bytes]:
    connection.request(method, path)
    reply = connection.getresponse()
    return reply.status, reply.getheaders(), reply.read()


def fetch(endpoint: str, path: str, method: str = "GET") -> tuple[int, list[tuple[str, str]], bytes]:
    """One request on a connection of its own."""
    connection = connect(endpoint)
    try:
        return ask(connection, path, method)
    finally:
        connection.close()


def read_until_failure(reply: http.client.HTTPResponse) -> tuple[bytes, Exception | None]:
    """The body bytes that arrived, in single socket reads so that none is lost to the error that ends them."""
    received = b""
    try:
        while chunk := reply.read1(64 * 1024):
            received += chunk
    except OSError as error:
        return received, error
    return received, None


def is_reset(error: BaseException | None) -> bool:
    """A TCP RST: ECONNRESET itself, not http.client's RemoteDisconnected (a subclass) for a clean close."""
    return type(error) is ConnectionResetError and error.errno == errno.ECONNRESET


def without_date(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers if name != "Date"]


def hub_paths(hub: HubServer) -> list[tuple[str, str]]:
    return [(request.method, request.path) for request in hub.requests]


def test_requests_and_replies_pass_unchanged_heads_and_redirects_included(hub: HubServer, relay: Relay) -> None:
    asked = [
        ("GET", BLOB_PATH),
        ("HEAD", BLOB_PATH),
        ("GET", WEIGHTS_PATH),  # 302 to the CDN, Content-Length: 0
        ("HEAD", WEIGHTS_PATH),
        ("GET", f"/api/models/{REPO}"),
    ]
    kept_alive = connect(relay.endpoint)  # the framing of every reply must leave the connection usable
    try:
        for method, path in asked:
            direct = fetch(hub.endpoint, path, method)
            relayed = ask(kept_alive, path, method)
            assert relayed[0] == direct[0] and relayed[2] == direct[2], (method, path)
            assert without_date(relayed[1]) == without_date(direct[1]), (method, path)
    finally:
        kept_alive.close()
    redirect = fetch(relay.endpoint, WEIGHTS_PATH, "HEAD")
    assert redirect[0] == 302 and dict(redirect[1])["Location"].startswith(hub.cdn_endpoint + "/lfs/")
    assert relay.traffic.requests == [*asked, ("HEAD", WEIGHTS_PATH)]
    api_reply = fetch(hub.endpoint, f"/api/models/{REPO}")[2]
    assert relay.traffic.body_bytes == len(BLOB) + len(api_reply)


def test_a_status_fault_answers_times_requests_then_lets_them_through(hub: HubServer, relay: Relay) -> None:
    fault = relay.add_fault(StatusFault(status=503, times=3, match="/blob.dat"))
    connection = connect(relay.endpoint)  # an error reply keeps the connection open, as S3's does
    try:
        replies = [ask(connection, BLOB_PATH) for _ in range(4)]
    finally:
        connection.close()
    for status, headers, body in replies[:3]:
        assert (status, dict(headers)["Content-Type"], body) == (503, "application/xml", SLOW_DOWN)
    assert (replies[3][0], replies[3][2]) == (200, BLOB)
    assert fault.hits == 3
    assert hub_paths(hub) == [("GET", BLOB_PATH)]  # struck requests never reach the server
    assert len(relay.traffic.requests) == 4 and relay.traffic.body_bytes == len(BLOB)


def test_status_fault_bodies(relay: Relay) -> None:
    relay.add_fault(StatusFault(status=500))
    assert b"<Code>InternalError</Code>" in fetch(relay.endpoint, CONFIG_PATH)[2]
    hub_error = json.dumps({"error": "Too many requests"}).encode()
    relay.add_fault(
        StatusFault(status=429, body=hub_error, content_type="application/json", headers={"Retry-After": "1"})
    )
    status, headers, body = fetch(relay.endpoint, CONFIG_PATH)
    assert (status, body) == (429, hub_error)
    assert dict(headers)["Content-Type"] == "application/json" and dict(headers)["Retry-After"] == "1"
    with pytest.raises(ValueError, match="no default error body"):
        StatusFault(status=429)
    with pytest.raises(ValueError, match="times"):
        StatusFault(times=0)


def test_a_reset_fault_sends_the_real_headers_and_n_bytes_then_resets(hub: HubServer, relay: Relay) -> None:
    fault = relay.add_fault(ResetFault(after_bytes=100_000, times=2, match=BLOB_PATH))
    real_headers = dict(fetch(hub.endpoint, BLOB_PATH, "HEAD")[1])
    for _ in range(2):
        connection = connect(relay.endpoint)
        connection.request("GET", BLOB_PATH)
        reply = connection.getresponse()
        assert reply.status == 200
        assert reply.getheader("Content-Length") == str(len(BLOB))
        assert reply.getheader("ETag") == real_headers["ETag"]
        received, error = read_until_failure(reply)
        connection.close()
        assert received == BLOB[:100_000]
        assert is_reset(error), repr(error)
    assert fetch(relay.endpoint, BLOB_PATH)[2] == BLOB
    assert fault.hits == 2
    assert relay.traffic.body_bytes == 2 * 100_000 + len(BLOB)  # only the bytes the client was sent


def test_a_reset_before_the_headers_reaches_neither_the_server_nor_a_reply(hub: HubServer, relay: Relay) -> None:
    relay.add_fault(ResetFault(before_headers=True))
    connection = connect(relay.endpoint)
    connection.request("GET", BLOB_PATH)
    with pytest.raises(ConnectionResetError) as caught:
        connection.getresponse()
    connection.close()
    assert is_reset(caught.value)
    assert hub_paths(hub) == [] and relay.traffic.requests == [("GET", BLOB_PATH)]
    with pytest.raises(ValueError, match="before_headers"):
        ResetFault(before_headers=True, after_bytes=1)


#: A stall that outlasts a loopback request on a busy machine, so "answered during the stall" is an event to check.
HELD_SECONDS = 3.0


def still_silent(connection: http.client.HTTPConnection) -> bool:
    """Nothing more to read on the connection, not even its end: the relay is still holding it."""
    assert connection.sock is not None
    return not select.select([connection.sock], [], [], 0)[0]


def test_a_stall_holds_its_reply_while_other_requests_are_answered(relay: Relay) -> None:
    fault = relay.add_fault(StallFault(seconds=HELD_SECONDS, after_bytes=10_000, match=BLOB_PATH))
    started = time.monotonic()
    stalled = connect(relay.endpoint)
    stalled.request("GET", BLOB_PATH)
    reply = stalled.getresponse()
    assert reply.status == 200 and reply.read(10_000) == BLOB[:10_000]  # the head and the first bytes, then silence

    assert fetch(relay.endpoint, CONFIG_PATH)[2] == b'{"a": 1}\n'
    assert still_silent(stalled), "the other request waited for the stall to end"

    with pytest.raises(http.client.IncompleteRead) as caught:  # closed cleanly, well short of Content-Length
        reply.read()
    stalled.close()
    assert time.monotonic() - started >= HELD_SECONDS  # a lower bound: a busy machine only makes it longer
    assert caught.value.partial == b"" and fault.hits == 1


def test_a_stall_before_the_headers_trips_read_timeouts_then_closes(relay: Relay) -> None:
    relay.add_fault(StallFault(seconds=0.6, before_headers=True, times=2))
    impatient = connect(relay.endpoint, timeout=0.2)
    impatient.request("GET", CONFIG_PATH)
    with pytest.raises(TimeoutError):
        impatient.getresponse()
    impatient.close()

    started = time.monotonic()
    patient = connect(relay.endpoint)
    patient.request("GET", CONFIG_PATH)
    with pytest.raises(http.client.RemoteDisconnected):
        patient.getresponse()
    patient.close()
    assert time.monotonic() - started >= 0.6  # a lower bound: the stall ran out before the relay closed


def test_stopping_the_relay_ends_its_stalls(hub: HubServer) -> None:
    with Relay(hub.endpoint) as relay:
        relay.add_fault(StallFault(seconds=60))
        connection = connect(relay.endpoint)
        connection.request("GET", BLOB_PATH)
        reply = connection.getresponse()
    with pytest.raises(http.client.IncompleteRead):  # not TimeoutError: a stall left running outlasts the 10 s read
        reply.read()
    connection.close()


def test_refuse_resets_new_and_kept_alive_connections_until_switched_off(hub: HubServer, relay: Relay) -> None:
    kept_alive = connect(relay.endpoint)
    assert ask(kept_alive, CONFIG_PATH)[0] == 200
    relay.refuse = True
    fresh = connect(relay.endpoint)
    for connection in (fresh, kept_alive):
        with pytest.raises(ConnectionResetError) as caught:
            ask(connection, CONFIG_PATH)
        connection.close()
        assert is_reset(caught.value)
    assert relay.traffic.refused == 2
    assert relay.traffic.requests == [("GET", CONFIG_PATH)] and len(hub.requests) == 1

    relay.refuse = False
    assert fetch(relay.endpoint, CONFIG_PATH)[0] == 200


def test_match_and_method_choose_the_requests_struck(relay: Relay) -> None:
    fault = relay.add_fault(StatusFault(status=503, match="/blob.dat", method="head", times=None))
    assert [fetch(relay.endpoint, BLOB_PATH, "HEAD")[0] for _ in range(3)] == [503] * 3  # persistent
    assert fetch(relay.endpoint, BLOB_PATH)[0] == 200
    assert fetch(relay.endpoint, CONFIG_PATH, "HEAD")[0] == 200
    assert fault.hits == 3

    relay.clear_faults()
    assert fetch(relay.endpoint, BLOB_PATH, "HEAD")[0] == 200


def test_faults_on_the_same_requests_strike_in_the_order_added(relay: Relay) -> None:
    reset = relay.add_fault(ResetFault(match=BLOB_PATH))
    error = relay.add_fault(StatusFault(status=500, match=BLOB_PATH))
    with pytest.raises(ConnectionResetError):
        fetch(relay.endpoint, BLOB_PATH)
    assert fetch(relay.endpoint, BLOB_PATH)[0] == 500
    assert fetch(relay.endpoint, BLOB_PATH)[2] == BLOB
    assert (reset.hits, error.hits) == (1, 1)


def test_lfs_downloads_go_through_a_hub_relay_and_a_cdn_relay(tmp_path: Path) -> None:
    with HubServer() as hub, Relay(hub.endpoint) as hub_relay, Relay(hub.cdn_endpoint) as cdn_relay:
        hub.add_repo(REPO, {"w.safetensors": WEIGHTS})
        hub.cdn_public_endpoint = cdn_relay.endpoint
        location = dict(fetch(hub.endpoint, WEIGHTS_PATH, "HEAD")[1])["Location"]
        assert location.startswith(cdn_relay.endpoint + "/lfs/")
        downloaded = hf_hub_download(
            REPO,
            "w.safetensors",
            endpoint=hub_relay.endpoint,
            token=False,
            local_dir=tmp_path / "out",
            cache_dir=tmp_path / "cache",
        )
        assert Path(downloaded).read_bytes() == WEIGHTS
        assert ("HEAD", WEIGHTS_PATH) in hub_relay.traffic.requests
        sha256 = hashlib.sha256(WEIGHTS).hexdigest()
        assert [(method, path.partition("?")[0]) for method, path in cdn_relay.traffic.requests] == [
            ("GET", f"/lfs/{sha256}")
        ]
        assert cdn_relay.traffic.body_bytes == len(WEIGHTS)
