"""Behaviour on a real network's terms, through the emulator: round trips and a rate cap on every connection.

What is asserted is behaviour (connections used, bytes exact), never timing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.netem import NetworkEmulator
from devkit.programs import run_program
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS

MiB = 1 << 20
LARGE = os.urandom(40 * MiB + 4321)  # six 8 MiB ranges, the last one short


@pytest.fixture
def network(seaweed: SeaweedFS) -> Iterator[NetworkEmulator]:
    with NetworkEmulator(seaweed.endpoint, rtt=0.02, rate=16e6) as emulator:
        yield emulator


def fetch_s3(seaweed: SeaweedFS, network: NetworkEmulator, uri: str, output: Path, **extra: str) -> Any:
    env = {**seaweed.env(), "ENDPOINT": network.url, "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra}
    return run_program("dataset", env)


def test_a_large_object_arrives_over_several_connections(
    seaweed: SeaweedFS, s3: Any, bucket: str, network: NetworkEmulator, tmp_path: Path
):
    s3.put_object(Bucket=bucket, Key="weights.bin", Body=LARGE)
    result = fetch_s3(seaweed, network, f"s3://{bucket}", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert (tmp_path / "out" / "weights.bin").read_bytes() == LARGE
    # One for the listing, one per range at once: the ranges ran side by side.
    assert network.connections.peak >= 5
    assert network.connections.bytes_to_clients >= len(LARGE)


def test_small_objects_are_fetched_concurrently_and_more_so_when_it_pays(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    objects = {f"shard-{i % 7}/item-{i:04d}.json": os.urandom(4096) for i in range(600)}
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=item[0], Body=item[1]), objects.items()))
    # A long round trip: the process waits on the network, far from the CPU share at which the ramp holds back,
    # even on a loaded machine.
    with NetworkEmulator(seaweed.endpoint, rtt=0.06, rate=16e6) as network:
        result = fetch_s3(seaweed, network, f"s3://{bucket}", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert all((tmp_path / "out" / key).read_bytes() == body for key, body in objects.items())
    started = result.named("fetching")[0]
    assert started["workers"] == 8 and started["max_workers"] == 64
    # Every request waits a round trip: more connections than the eight it started with paid, and were opened.
    assert network.connections.peak > 8 + 1


def test_small_objects_run_many_at_once_even_where_the_cpu_is_the_limit(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """Loopback, no delay: our CPU is busy, so the ramp adds no streams; small files are bound by round trips,
    not bytes, and many run per stream from the start."""
    objects = {f"part-{i % 5}/row-{i:04d}.json": os.urandom(2048) for i in range(600)}
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=item[0], Body=item[1]), objects.items()))
    with NetworkEmulator(seaweed.endpoint, rtt=0.0, rate=None) as counting:
        result = fetch_s3(seaweed, counting, f"s3://{bucket}", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert all((tmp_path / "out" / key).read_bytes() == body for key, body in objects.items())
    # 64 transfers (the default cap), beside the listing's; the ramp alone, doubling from 8 in the few windows
    # this run lasts, would reach 32 at most.
    assert counting.connections.peak > 40


def test_max_workers_caps_the_connections(
    seaweed: SeaweedFS, s3: Any, bucket: str, network: NetworkEmulator, tmp_path: Path
):
    s3.put_object(Bucket=bucket, Key="weights.bin", Body=LARGE)
    result = fetch_s3(seaweed, network, f"s3://{bucket}", tmp_path / "out", MAX_WORKERS="2")
    assert result.code == 0, result.stdout + result.stderr
    assert (tmp_path / "out" / "weights.bin").read_bytes() == LARGE
    assert network.connections.peak <= 2 + 1  # the transfers, and the listing's connection kept open


#: The object GETs of the first wave: more than the 64 a CPU-bound run starts with, fewer than half the run's 500.
FIRST_WAVE = 200


def test_over_a_long_round_trip_small_objects_start_many_at_once_and_never_more_than_max_workers(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """RTT 50 ms: the listing's round trip already shows small-object requests wait on the network, so more of them
    than the 64 a CPU-bound run takes are under way while the first wave arrives (among the first `FIRST_WAVE` object
    GETs of 500); within MAX_WORKERS, by default too. The relay in front of the emulator counts the object GETs under
    way at once, as the client sees them, in the order they arrived: bound by those events, not by a second of wall
    time, which two suites at once on the 2 cores made too short (51 at once within it, at MAX_WORKERS=100)."""
    objects = {f"d{i % 10}/f{i:04d}.bin": os.urandom(1024) for i in range(500)}
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=item[0], Body=item[1]), objects.items()))
    seen: dict[str, tuple[int, int]] = {}  # MAX_WORKERS -> most object GETs at once (in the first second, in all)
    with NetworkEmulator(seaweed.endpoint, rtt=0.05, rate=4e6) as network, Relay(network.url) as relay:
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}"}
        for max_workers in ("", "100", "8"):
            relay.reset()
            output = tmp_path / f"out{max_workers}"
            capped = {"MAX_WORKERS": max_workers} if max_workers else {}
            result = run_program("dataset", {**env, "OUTPUT_PATH": str(output), **capped})
            assert result.code == 0, result.stdout + result.stderr
            assert all((output / key).read_bytes() == body for key, body in objects.items())
            seen[max_workers] = (
                relay.traffic.object_gets_at_once_among_first(FIRST_WAVE),
                relay.traffic.object_gets_at_once,
            )
    assert seen[""][0] > 64 and seen[""][1] <= 256, seen  # unset: up to the S3 source's 256 small-file requests
    assert seen["100"][0] > 64 and seen["100"][1] <= 100, seen
    assert seen["8"][1] <= 8, seen


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo("org/big", {"config.json": b"{}", "model.safetensors": LARGE})
        yield server


@pytest.mark.parametrize("honour_ranges", [True, False], ids=["ranges", "whole-file-server"])
def test_a_large_hub_file_arrives_in_parallel_ranges_where_the_cdn_takes_them(
    hub: HubServer, tmp_path: Path, honour_ranges: bool
):
    hub.reset()
    hub.honour_ranges = honour_ranges
    with NetworkEmulator(hub.cdn_endpoint, rtt=0.02, rate=16e6) as cdn:
        hub.cdn_public_endpoint = cdn.url
        try:
            env = {"STORAGE_URI": "hf://org/big", "OUTPUT_PATH": str(tmp_path / "out"), "HF_ENDPOINT": hub.endpoint}
            result = run_program("model", env)
        finally:
            hub.cdn_public_endpoint = None
            hub.honour_ranges = True
        peak = cdn.connections.peak
    assert result.code == 0, result.stdout + result.stderr
    weights = (tmp_path / "out" / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).digest() == hashlib.sha256(LARGE).digest()
    cdn_gets = [r for r in hub.requests if r.origin == "cdn" and r.method == "GET"]
    if honour_ranges:
        assert result.named("range probe")[0]["ranges"] is True
        assert peak >= 5 and len(cdn_gets) == 1 + 6  # the probe, then six ranges
    else:
        assert result.named("range probe")[0]["ranges"] is False
        assert len(cdn_gets) == 2  # the probe, answered with the whole file and dropped; then one stream


def test_over_tls_s3_is_served_as_http_1_1_and_the_emulator_passes_it_through(tmp_path: Path):
    """SeaweedFS over TLS (as the network bench runs it) offers HTTP/1.1 alone, as S3 does: a Go peer offered HTTP/2
    would put every request on one connection, which the emulator caps. Through the emulator, TLS end to end: a large
    object arrives over several connections, trusted through AWS_CA_BUNDLE."""
    import socket
    import ssl

    with SeaweedFS.start(tls=True, parent=tmp_path) as server:
        assert server.certificate is not None and server.endpoint.startswith("https://")
        context = ssl.create_default_context(cafile=server.certificate)
        context.set_alpn_protocols(["h2", "http/1.1"])
        host, port = server.endpoint.removeprefix("https://").split(":")
        with socket.create_connection((host, int(port))) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.selected_alpn_protocol() == "http/1.1"
        server.client().create_bucket(Bucket="secure")
        server.client().put_object(Bucket="secure", Key="weights.bin", Body=LARGE)
        with NetworkEmulator(server.endpoint, rtt=0.02, rate=16e6) as network:
            assert network.url.startswith("https://")
            result = fetch_s3(server, network, "s3://secure", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert (tmp_path / "out" / "weights.bin").read_bytes() == LARGE
    assert network.connections.peak >= 5 and network.connections.bytes_to_clients >= len(LARGE)
