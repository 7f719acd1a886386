"""Both data paths through an HTTP proxy named by the environment, as in a corporate network: plain requests
in absolute form, TLS through CONNECT, Basic credentials, NO_PROXY; bad proxy settings fail clearly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.programs import run_program
from devkit.proxy import Proxy
from devkit.relay import Relay, self_signed_certificate
from devkit.seaweed import SeaweedFS

BODY = os.urandom(20 * 1024 * 1024)  # three S3 ranges; an LFS file on the Hub, redirected to its CDN origin
PASSWORD = "proxy-pass-93b1"


@pytest.fixture
def objects(s3: Any, bucket: str) -> str:
    s3.put_object(Bucket=bucket, Key="d/big.bin", Body=BODY)
    s3.put_object(Bucket=bucket, Key="d/small.txt", Body=b"small")
    return bucket


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    with Proxy(credentials=("user", PASSWORD)) as running:
        yield running


def authenticated(proxy: Proxy, password: str = PASSWORD) -> str:
    return proxy.url.replace("http://", f"http://user:{password}@")


def s3_fetch(seaweed: SeaweedFS, bucket: str, output: Path, endpoint: str, **extra: str) -> Any:
    env = {**seaweed.env(), "ENDPOINT": endpoint, "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(output)}
    return run_program("dataset", {**env, **extra})


def fetched(output: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in output.iterdir() if p.is_file()}


def test_s3_through_a_proxy_with_credentials(seaweed: SeaweedFS, objects: str, proxy: Proxy, tmp_path: Path):
    result = s3_fetch(seaweed, objects, tmp_path / "out", seaweed.endpoint, HTTP_PROXY=authenticated(proxy))
    assert result.code == 0, result.stderr
    assert fetched(tmp_path / "out") == {"big.bin": BODY, "small.txt": b"small"}
    gets = proxy.log.targets("GET")
    assert any("list-type=2" in target for target in gets)  # the listing went through it
    assert sum(target.startswith(f"{seaweed.endpoint}/{objects}/d/big.bin") for target in gets) == 3  # every range
    assert PASSWORD not in result.stdout + result.stderr


def test_no_proxy_bypasses_it(seaweed: SeaweedFS, objects: str, proxy: Proxy, tmp_path: Path):
    result = s3_fetch(
        seaweed, objects, tmp_path / "out", seaweed.endpoint, HTTP_PROXY=authenticated(proxy), NO_PROXY="127.0.0.1"
    )
    assert result.code == 0, result.stderr
    assert proxy.log.requests == []


def test_tls_through_a_connect_tunnel(seaweed: SeaweedFS, objects: str, proxy: Proxy, tmp_path: Path):
    cert, key = self_signed_certificate(tmp_path)
    with Relay(seaweed.endpoint, tls=(cert, key)) as relay:
        result = s3_fetch(
            seaweed, objects, tmp_path / "out", relay.endpoint,
            HTTPS_PROXY=authenticated(proxy), AWS_CA_BUNDLE=str(cert),
        )  # fmt: skip
    assert result.code == 0, result.stderr
    assert fetched(tmp_path / "out") == {"big.bin": BODY, "small.txt": b"small"}
    assert set(proxy.log.targets("CONNECT")) == {relay.endpoint.removeprefix("https://")}
    assert proxy.log.targets("GET") == []  # nothing in the clear


def test_the_hub_through_a_proxy(proxy: Proxy, tmp_path: Path):
    with HubServer() as hub:
        hub.add_repo("org/m", {"config.json": b"{}", "model.safetensors": BODY})
        env = {"STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(tmp_path / "out"), "HF_ENDPOINT": hub.endpoint,
               "HTTP_PROXY": authenticated(proxy)}  # fmt: skip
        result = run_program("model", env)
    assert result.code == 0, result.stderr
    assert fetched(tmp_path / "out") == {"config.json": b"{}", "model.safetensors": BODY}
    gets = proxy.log.targets("GET")
    assert any(target.startswith(f"{hub.endpoint}/api/models/org/m") for target in gets)  # huggingface_hub's calls
    assert any(target.startswith(f"{hub.cdn_endpoint}/") for target in gets)  # ours, after the LFS redirect


def test_wrong_proxy_credentials_fail_without_echoing_them(
    seaweed: SeaweedFS, objects: str, proxy: Proxy, tmp_path: Path
):
    result = s3_fetch(seaweed, objects, tmp_path / "out", seaweed.endpoint, HTTP_PROXY=authenticated(proxy, "nope-7c"))
    assert result.code == 1
    assert "407" in result.last["error"]
    assert "nope-7c" not in result.stdout + result.stderr


def test_an_unsupported_proxy_scheme_is_a_configuration_error(seaweed: SeaweedFS, objects: str, tmp_path: Path):
    result = s3_fetch(seaweed, objects, tmp_path / "out", seaweed.endpoint, HTTP_PROXY="socks5://127.0.0.1:1080")
    assert result.code == 2
    assert "HTTP_PROXY: only http:// proxies are supported" in result.last["error"]
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("kind", "source"),
    [("model", {"STORAGE_URI": "hf://org/name"}),  # huggingface_hub's client once failed here with an ImportError
     ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json", "NUM_DATA_NODES": "2"})],
)  # fmt: skip
def test_every_source_refuses_an_unsupported_proxy_scheme_alike(kind: str, source: dict[str, str], tmp_path: Path):
    result = run_program(kind, {**source, "OUTPUT_PATH": str(tmp_path / "out"), "HTTPS_PROXY": "socks5://h:1080"})
    assert result.code == 2 and "HTTPS_PROXY: only http:// proxies are supported" in result.last["error"]
