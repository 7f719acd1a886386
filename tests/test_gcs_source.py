"""The gs:// source end to end: the real programs against fake-gcs-server (Google's JSON API, its emulator), and
google-auth's own service-account flow against a token endpoint on loopback. Shared behaviours (a changed
generation, a flipped byte in transit, errors, throttling, a stop and the resume) are the conformance suite's."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from devkit.fake_gcs import FakeGCS
from devkit.outputs import manifest, tree
from devkit.programs import ProgramResult, run_program
from devkit.relay import Relay, StatusFault
from devkit.serving import QuietDisconnects, send_json
from initializers.store.contract import MAX_EMPTY_PAGES

ODD = {
    "data/a b/c d.txt": b"spaces",
    "data/ünï/çødé ✓.txt": b"unicode",
    "data/hash#tag?.txt": b"hash and question mark",
    "data/per%cent+plus;semi.txt": b"punctuation",
    "data/deep/1/2/3/leaf.json": b"{}",
    "data/empty.txt": b"",
}


@pytest.fixture
def bucket(fake_gcs: FakeGCS) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    fake_gcs.create_bucket(name)
    return name


def fetch(fake_gcs: FakeGCS, uri: str, output: Path, kind: str = "dataset", **extra: str) -> ProgramResult:
    return run_program(kind, {**fake_gcs.env(), "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra})


def test_a_prefix_lands_relative_to_it_with_odd_names_each_verified_by_its_crc32c(
    fake_gcs: FakeGCS, bucket: str, tmp_path: Path
):
    for name, body in {**ODD, "data-old/not.txt": b"beside the prefix", "top.txt": b"top"}.items():
        fake_gcs.put_object(bucket, name, body)
    result = fetch(fake_gcs, f"gs://{bucket}/data", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == {name.removeprefix("data/"): body for name, body in ODD.items()}
    entries = manifest(tmp_path / "out")["files"]
    assert {entry["checksum"]["algorithm"] for entry in entries} == {"crc32c"}
    assert all(entry["version"].isdigit() for entry in entries), "the version is the object's generation"


def test_a_uri_naming_one_object_fetches_it(fake_gcs: FakeGCS, bucket: str, tmp_path: Path):
    fake_gcs.put_object(bucket, "models/weights.safetensors", b"w" * 1000)
    fake_gcs.put_object(bucket, "models/weights.safetensors.bak", b"not this one")
    result = fetch(fake_gcs, f"gs://{bucket}/models/weights.safetensors", tmp_path / "out", kind="model")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == {"weights.safetensors": b"w" * 1000}


def test_a_large_object_comes_in_ranges_and_one_listed_with_only_an_md5_is_verified_by_it(
    fake_gcs: FakeGCS, bucket: str, tmp_path: Path
):
    big, md5_only = os.urandom(20 * 1024 * 1024 + 3), os.urandom(300_000)
    fake_gcs.put_object(bucket, "big.bin", big)
    fake_gcs.put_object(bucket, "md5-only.bin", md5_only)
    _forget(fake_gcs, bucket, "md5-only.bin", "Crc32c")
    result = fetch(fake_gcs, f"gs://{bucket}", tmp_path / "out", LOG_LEVEL="debug")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == {"big.bin": big, "md5-only.bin": md5_only}
    algorithms = {entry["path"]: entry["checksum"]["algorithm"] for entry in manifest(tmp_path / "out")["files"]}
    assert algorithms == {"big.bin": "crc32c", "md5-only.bin": "md5"}


@pytest.mark.parametrize("name", ["big.bin", "md5-only.bin"])
def test_a_byte_flipped_in_the_stored_copy_fails_the_run_and_leaves_nothing(
    fake_gcs: FakeGCS, bucket: str, tmp_path: Path, name: str
):
    fake_gcs.put_object(bucket, name, os.urandom(20 * 1024 * 1024 if name == "big.bin" else 100_000))
    if name == "md5-only.bin":
        _forget(fake_gcs, bucket, name, "Crc32c")
    stored = fake_gcs.object_file(bucket, name)
    with open(stored, "r+b") as handle:  # served under the hashes it was stored with
        handle.seek(12345)
        byte = handle.read(1)
        handle.seek(12345)
        handle.write(bytes([byte[0] ^ 0xFF]))
    result = fetch(fake_gcs, f"gs://{bucket}", tmp_path / "out")
    assert result.code == 1
    assert "checksum mismatch" in result.last["error"] and name in result.last["error"]
    assert not (tmp_path / "out" / name).exists()
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


def test_a_missing_bucket_is_named(fake_gcs: FakeGCS, tmp_path: Path):
    result = fetch(fake_gcs, "gs://no-such-bucket-here/data", tmp_path / "out")
    assert result.code == 1
    assert "gs://no-such-bucket-here/data/" in result.last["error"] and "does not exist" in result.last["error"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("gs://", "names no bucket"),
        ("gs:///data", "names no bucket"),
        ("gs://Upper-Case/data", "is not a Cloud Storage bucket name"),
        ("gs://ab", "is not a Cloud Storage bucket name"),
    ],
)
def test_a_malformed_uri_is_refused_naming_what_is_wrong(fake_gcs: FakeGCS, tmp_path: Path, uri: str, says: str):
    result = fetch(fake_gcs, uri, tmp_path / "out")
    assert result.code == 2
    assert result.last["error"].startswith("STORAGE_URI:") and says in result.last["error"]


def _no_google_environment(tmp_path: Path) -> dict[str, str]:
    """No credentials anywhere google-auth looks: no variables, no gcloud folder, no metadata server."""
    return {"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "GCE_METADATA_HOST": "127.0.0.1:9",
            "GCE_METADATA_IP": "127.0.0.1:9"}  # fmt: skip


def test_without_credentials_the_run_is_refused_naming_where_they_come_from(tmp_path: Path):
    env = {
        "STORAGE_URI": "gs://some-bucket/data",
        "OUTPUT_PATH": str(tmp_path / "out"),
        **_no_google_environment(tmp_path),
    }
    result = run_program("dataset", env)
    assert result.code == 2
    assert "no Google credentials were found" in result.last["error"]
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.last["error"] and "ANONYMOUS" in result.last["error"]


class TokenEndpoint(QuietDisconnects, HTTPServer):
    """Google's OAuth token endpoint, as a service-account key's `token_uri` names it: a JWT bearer grant in, an
    access token out (or a refusal)."""

    def __init__(self, refuse: bool = False) -> None:
        self.grants: list[str] = []
        self.refuse = refuse
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"])).decode()
                endpoint.grants.append(body)
                answer, status = (
                    ({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, 400)
                    if endpoint.refuse
                    else ({"access_token": "ya29.issued-token", "expires_in": 3600, "token_type": "Bearer"}, 200)
                )
                send_json(self, status, answer)

            def log_message(self, *_args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/token"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def service_account_key(tmp_path: Path) -> Iterator[tuple[Path, TokenEndpoint]]:
    """A service-account key file, as GOOGLE_APPLICATION_CREDENTIALS names one, whose token endpoint is on loopback."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    endpoint = TokenEndpoint()
    path = tmp_path / "key.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": pem.decode(),
        "client_email": "reader@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": endpoint.url,
    }))  # fmt: skip
    try:
        yield path, endpoint
    finally:
        endpoint.close()


def test_a_service_account_key_gets_one_token_for_the_whole_run(
    fake_gcs: FakeGCS, bucket: str, service_account_key: tuple[Path, TokenEndpoint], tmp_path: Path
):
    """google-auth signs a JWT with the key and trades it at the key's token endpoint for a token, once, which every
    request of the run carries until it nears expiry (GCS_ENDPOINT sends them to the emulator, which takes any)."""
    for index in range(40):
        fake_gcs.put_object(bucket, f"data/{index}.txt", b"%d" % index)
    path, endpoint = service_account_key
    env = {"STORAGE_URI": f"gs://{bucket}/data", "OUTPUT_PATH": str(tmp_path / "out"),
           "GCS_ENDPOINT": fake_gcs.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(path),
           **_no_google_environment(tmp_path)}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 0, result.stdout + result.stderr
    assert len(tree(tmp_path / "out")) == 40
    (grant,) = endpoint.grants
    assert "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer" in grant


def test_a_refused_key_fails_the_run_without_printing_it(
    fake_gcs: FakeGCS, bucket: str, service_account_key: tuple[Path, TokenEndpoint], tmp_path: Path
):
    fake_gcs.put_object(bucket, "data/a.txt", b"a")
    path, endpoint = service_account_key
    endpoint.refuse = True
    env = {"STORAGE_URI": f"gs://{bucket}/data", "OUTPUT_PATH": str(tmp_path / "out"),
           "GCS_ENDPOINT": fake_gcs.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(path),
           **_no_google_environment(tmp_path)}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 1
    assert (
        "refreshing the Google credentials failed" in result.last["error"] and "invalid_grant" in result.last["error"]
    )
    private_key = json.loads(path.read_text())["private_key"]
    assert private_key.splitlines()[1] not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()


def _forget(fake_gcs: FakeGCS, bucket: str, name: str, field: str) -> None:
    """Make a stored object's listing lack one of its hashes (`Crc32c`, `Md5Hash`), as the emulator records them in
    an extended attribute of its file."""
    stored = fake_gcs.object_file(bucket, name)
    metadata = json.loads(os.getxattr(stored, "user.metadata"))
    del metadata[field]
    os.setxattr(stored, "user.metadata", json.dumps(metadata).encode())


class EndlessListing(QuietDisconnects, HTTPServer):
    """A server that answers every listing with a page of nothing and a next page: a fresh token each time
    (`repeat=False`), or always the same one."""

    def __init__(self, repeat: bool) -> None:
        self.pages = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.pages += 1
                token = "again" if repeat else f"page-{server.pages}"
                send_json(self, 200, {"items": [], "nextPageToken": token})

            def log_message(self, *_args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.mark.parametrize("repeat", [False, True], ids=["empty pages without end", "a token that comes back"])
def test_a_listing_that_never_ends_fails_naming_the_bucket(tmp_path: Path, repeat: bool):
    server = EndlessListing(repeat)
    try:
        env = {"STORAGE_URI": "gs://endless/data", "OUTPUT_PATH": str(tmp_path / "out"),
               "STORAGE_EMULATOR_HOST": server.endpoint}  # fmt: skip
        result = run_program("dataset", env)
    finally:
        server.shutdown()
        server.server_close()
    assert result.code == 1
    assert "listing gs://endless/data/" in result.last["error"] and "goes nowhere" in result.last["error"]
    assert server.pages == (2 if repeat else MAX_EMPTY_PAGES)
    assert not (tmp_path / "out").exists()


def test_over_tls_the_server_is_trusted_through_ssl_cert_file_and_refused_without(tmp_path: Path):
    """fake-gcs-server over HTTPS alone with a certificate of its own (as bench/clouds.py runs it): the listing and a
    large object's ranges come over TLS when SSL_CERT_FILE names it; without it the run fails at once, naming it."""
    with FakeGCS.start(parent=tmp_path, tls=True) as server:
        assert server.endpoint.startswith("https://") and server.certificate is not None
        big = os.urandom(20 * 1024 * 1024 + 3)
        server.create_bucket("secure")
        server.put_object("secure", "big.bin", big)
        server.put_object("secure", "small.txt", b"small")
        result = fetch(server, "gs://secure", tmp_path / "out")
        assert result.code == 0, result.stdout + result.stderr
        assert tree(tmp_path / "out") == {"big.bin": big, "small.txt": b"small"}
        untrusted = run_program("dataset", {"STORAGE_EMULATOR_HOST": server.endpoint, "STORAGE_URI": "gs://secure",
                                            "OUTPUT_PATH": str(tmp_path / "refused")})  # fmt: skip
        assert untrusted.code == 1 and "SSL_CERT_FILE" in untrusted.last["error"], untrusted.stdout
        assert not (tmp_path / "refused" / "big.bin").exists()


@pytest.mark.parametrize("status", [200, 400], ids=["listing", "error"])
def test_an_answer_nested_deeper_than_json_parses_fails_naming_the_server(
    fake_gcs: FakeGCS, bucket: str, tmp_path: Path, status: int
):
    """`[[[[...` for 100 KB: JSON's parser meets it with a RecursionError, which is no internal error of ours."""
    with Relay(fake_gcs.endpoint) as relay:
        relay.add_fault(StatusFault(status=status, match=f"/b/{bucket}/o", times=None, body=b"[" * 100_000,
                                    content_type="application/json"))  # fmt: skip
        result = fetch(fake_gcs, f"gs://{bucket}/data", tmp_path / "out", STORAGE_EMULATOR_HOST=relay.endpoint)
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.last["error"] and f"gs://{bucket}/data" in result.last["error"], result.last
