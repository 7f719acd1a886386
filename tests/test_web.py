"""The https:// store against a real web server (nginx on loopback, `devkit.nginx`): a digest pinned in the URL, the
server's own digest, a server that ignores Range, a name from Content-Disposition, a redirect to another host, plain
HTTP's warning, and the secrets a run is given (a presigned URL's query, HTTP_HEADERS) shown nowhere. What every store
does (ranges, faults, a stop, throttling) is the conformance suite's (`tests/test_conformance.py`, `[https]`)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import pytest
from test_reliability import finish, wait_until

from devkit.conformance import manifest_entries
from devkit.nginx import NO_RANGES, Nginx
from devkit.programs import ProgramResult, run_program, start_program
from devkit.relay import Relay
from initializers.destination.manifest import SIZE_AND_VERSION

#: Larger than two 8 MiB ranges: fetched in ranges where the server answers them.
BIG = os.urandom(20 * 1024 * 1024 + 5)
SMALL = b"a small file on the web\n"
#: What a presigned URL carries, and a bearer token: neither may show anywhere.
SIGNATURE = "5d41402abc4b2a76b9719d911017c592aa5ff2c0e3b1f1e7b6d7c9a8e4f3b2a1"
TOKEN = "tok_WebTest4Kx9Qm2Zr7Lp3Vn8"


def _repr_digest(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


@pytest.fixture(scope="module")
def web() -> Iterator[Nginx]:
    """nginx whose few exact paths answer with a header of their own: a right and a wrong Repr-Digest, a file named
    by Content-Disposition at a path that ends in no name, and a redirect (`/moved`, aimed by each test)."""
    extra = {
        "/digest/good.bin": f'add_header Repr-Digest "{_repr_digest(SMALL)}";',
        "/digest/bad.bin": f'add_header Repr-Digest "{_repr_digest(b"another file")}";',
        "/download/": "try_files /payload.bin =404; add_header Content-Disposition "
        "\"attachment; filename*=UTF-8''w%C3%A9ights.bin\";",
    }
    with Nginx.start(extra) as server:
        server.put("digest/good.bin", SMALL)
        server.put("digest/bad.bin", SMALL)
        server.put("payload.bin", SMALL)
        server.put("files/big.bin", BIG)
        server.put("files/small.txt", SMALL)
        server.put(f"{NO_RANGES}/big.bin", BIG)
        yield server


def fetch(uri: str, output: Path, kind: str = "dataset", **extra: str) -> ProgramResult:
    return run_program(kind, {"STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra}, timeout=120)


def ok(result: ProgramResult) -> None:
    assert result.code == 0, result.stderr[-3000:]
    assert result.last["event"] == "done", result.last


def landed(output: Path) -> dict[str, bytes]:
    return {
        p.relative_to(output).as_posix(): p.read_bytes()
        for p in output.rglob("*")
        if p.is_file() and ".initializer" not in p.parts
    }


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_a_pinned_digest_verifies_the_file(web: Nginx, tmp_path: Path, algorithm: str):
    digest = hashlib.new(algorithm, BIG).hexdigest()
    result = fetch(f"{web.url('files/big.bin')}#{algorithm}={digest.upper()}", tmp_path)
    ok(result)
    assert landed(tmp_path) == {"big.bin": BIG}
    (entry,) = manifest_entries(tmp_path)
    assert entry["checksum"] == {"algorithm": algorithm, "hexdigest": digest}
    assert len(result.named("plain http")) == 1, "http:// is said once"


def test_a_pinned_digest_that_does_not_match_lands_nothing(web: Nginx, tmp_path: Path):
    result = fetch(f"{web.url('files/small.txt')}#sha256={'0' * 64}", tmp_path)
    assert result.code == 1, result.stderr[-3000:]
    assert "sha256 checksum mismatch" in result.last["error"] and "files/small.txt" in result.last["error"]
    assert landed(tmp_path) == {} and not (tmp_path / ".initializer" / "manifest.json").exists()


def test_the_servers_repr_digest_verifies_the_file_and_a_wrong_one_fails_it(web: Nginx, tmp_path: Path):
    ok(fetch(web.url("digest/good.bin"), tmp_path / "good"))
    (entry,) = manifest_entries(tmp_path / "good")
    assert entry["checksum"] == {"algorithm": "sha256", "hexdigest": hashlib.sha256(SMALL).hexdigest()}
    refused = fetch(web.url("digest/bad.bin"), tmp_path / "bad")
    assert refused.code == 1 and "checksum mismatch" in refused.last["error"], refused.last
    assert landed(tmp_path / "bad") == {}


def test_without_a_digest_the_file_is_recorded_by_size_and_etag_said_once(web: Nginx, tmp_path: Path):
    result = fetch(web.url("files/small.txt"), tmp_path)
    ok(result)
    (entry,) = manifest_entries(tmp_path)
    assert entry["verified"] == SIZE_AND_VERSION and entry["version"].startswith('"'), entry  # nginx's ETag
    (said,) = result.named("no digest")
    assert said["verified_by"] == f"size and {entry['version']}"


def test_ranges_where_the_server_answers_them_one_stream_where_it_ignores_them(web: Nginx, tmp_path: Path):
    with Relay(web.endpoint) as relay:
        ok(fetch(f"{relay.endpoint}/files/big.bin", tmp_path / "ranged"))
        ranged = [path for method, path in relay.traffic.requests if method == "GET"]
        relay.reset()
        ok(fetch(f"{relay.endpoint}/{NO_RANGES}/big.bin", tmp_path / "whole"))
        whole = [path for method, path in relay.traffic.requests if method == "GET"]
    assert landed(tmp_path / "ranged") == landed(tmp_path / "whole") == {"big.bin": BIG}
    assert len(ranged) >= 4, ranged  # the probe, then three 8 MiB ranges at least
    assert len(whole) == 2, whole  # the probe (its answer, the whole file, left unread), then one stream


@pytest.mark.parametrize("folder", ["files", NO_RANGES])
def test_a_stop_mid_file_then_the_rerun_reads_on_where_ranges_let_it(web: Nginx, tmp_path: Path, folder: str):
    """SIGTERM while the file's bytes cross: exit 1; the re-run completes, reading on from the ranges kept where the
    server answers Range, from the start where it ignores it (nothing kept is built on)."""
    output = tmp_path / "out"
    with Relay(web.endpoint) as relay:
        relay.slow_paths, relay.bytes_per_second = f"/{folder}/big.bin", 2 << 20
        env = {"STORAGE_URI": f"{relay.endpoint}/{folder}/big.bin", "OUTPUT_PATH": str(output)}
        process = start_program("dataset", env)
        try:
            if folder == NO_RANGES:  # one stream: its bytes are crossing
                wait_until(lambda: relay.traffic.body_bytes > 3 << 20, timeout=60)
            else:  # the record of what landed in the file's temporary holds an interval after its header
                wait_until(
                    lambda: any(len(r.read_text().splitlines()) > 1 for r in output.glob(".initializer/tmp/*.ranges")),
                    timeout=60,
                )
            process.send_signal(signal.SIGTERM)
            stopped = finish(process, timeout=120)
        finally:
            process.kill()
        assert stopped.code == 1 and stopped.last["error"].startswith("stopped by SIGTERM"), stopped.last
        relay.slow_paths = relay.bytes_per_second = None
        again = fetch(f"{relay.endpoint}/{folder}/big.bin", output)
    ok(again)
    assert landed(output) == {"big.bin": BIG}
    kept = again.last["kept_bytes"]
    assert (kept > 0) if folder == "files" else (kept == 0), again.last


def test_a_path_ending_in_no_name_lands_under_content_dispositions(web: Nginx, tmp_path: Path):
    ok(fetch(web.url("download/"), tmp_path))
    assert landed(tmp_path) == {"wéights.bin": SMALL}


@pytest.mark.parametrize("name", ["a b+c%.bin", "wéights.bin", "x#y.bin"])
@pytest.mark.parametrize("written", ["escaped", "as typed"])
def test_an_odd_name_lands_as_the_urls_last_segment_says(web: Nginx, tmp_path: Path, name: str, written: str):
    """Escaped (`%20`, `%C3%A9`, `%23`) or typed as it is (a space, `é`, a lone `%`; `#` always escaped, or it starts
    the fragment), the URL names the file, which lands under its decoded name."""
    web.put(f"odd/{name}", name.encode())
    path = quote(name) if written == "escaped" else name.replace("#", "%23")
    ok(fetch(f"{web.endpoint}/odd/{path}", tmp_path))
    assert landed(tmp_path) == {name: name.encode()}


class _Capture(BaseHTTPRequestHandler):
    """A small server of our own: it ignores Range, answers with `version`'s headers and keeps the headers it was
    sent (another host a redirect leads to; a server whose ETag is weak)."""

    seen: ClassVar[list[dict[str, str]]] = []
    version: ClassVar[dict[str, str]] = {"ETag": '"v1"'}

    def do_GET(self) -> None:
        type(self).seen.append({name.lower(): value for name, value in self.headers.items()})
        self.send_response(200)
        self.send_header("Content-Length", str(len(SMALL)))
        for name, value in self.version.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(SMALL)

    def log_message(self, *_args: object) -> None:
        """Quiet."""


def test_a_redirect_to_another_host_is_followed_without_the_given_headers(tmp_path: Path):
    other = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{other.server_address[1]}/elsewhere/file.bin"
    try:
        with Nginx.start({"/moved/file.bin": f"return 302 {target};"}) as origin:
            headers = json.dumps({"Authorization": f"Bearer {TOKEN}"})
            result = fetch(origin.url("moved/file.bin"), tmp_path, HTTP_HEADERS=headers)
    finally:
        other.shutdown()
    ok(result)
    assert landed(tmp_path) == {"file.bin": SMALL}
    assert _Capture.seen and not [sent for sent in _Capture.seen if "authorization" in sent], _Capture.seen


def test_a_redirect_to_no_url_or_another_scheme_is_refused_naming_it(tmp_path: Path):
    moves = {"/moved/nowhere.bin": 'return 302 "http://[::1/x";', "/moved/ftp.bin": 'return 302 "ftp://x/f.bin";'}
    with Nginx.start(moves) as origin:
        nowhere = fetch(origin.url("moved/nowhere.bin"), tmp_path / "nowhere")
        ftp = fetch(origin.url("moved/ftp.bin"), tmp_path / "ftp")
    for result, said in ((nowhere, "redirected to 'http://[::1/x', which is no URL"), (ftp, "a ftp:// URL")):
        assert result.code == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
        assert said in result.last["error"], result.last
    assert not landed(tmp_path)


def test_a_weak_etag_pins_reads_by_last_modified(tmp_path: Path):
    """A weak ETag cannot be matched (If-Match compares strongly): the read is pinned by If-Unmodified-Since."""
    modified = "Tue, 01 Dec 2026 10:00:00 GMT"

    class Weak(_Capture):
        seen: ClassVar[list[dict[str, str]]] = []
        version: ClassVar[dict[str, str]] = {"ETag": 'W/"v1"', "Last-Modified": modified}

    server = ThreadingHTTPServer(("127.0.0.1", 0), Weak)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = fetch(f"http://127.0.0.1:{server.server_address[1]}/weak.bin", tmp_path)
    finally:
        server.shutdown()
    ok(result)
    probe, read = Weak.seen
    assert probe["range"] == "bytes=0-0" and "if-match" not in read, Weak.seen
    assert read["if-unmodified-since"] == modified and "range" not in read, read
    (entry,) = manifest_entries(tmp_path)
    assert entry["version"] == 'W/"v1"' and entry["verified"] == SIZE_AND_VERSION


def test_a_file_without_validators_is_versioned_by_its_pinned_digest(tmp_path: Path):
    """No ETag, no Last-Modified: nothing to pin the reads to; the digest pinned in the URL is the file's version."""

    class Bare(_Capture):
        seen: ClassVar[list[dict[str, str]]] = []
        version: ClassVar[dict[str, str]] = {}

    server = ThreadingHTTPServer(("127.0.0.1", 0), Bare)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    digest = hashlib.sha256(SMALL).hexdigest()
    try:
        result = fetch(f"http://127.0.0.1:{server.server_address[1]}/bare.txt#sha256={digest}", tmp_path)
    finally:
        server.shutdown()
    ok(result)
    assert not [sent for sent in Bare.seen if {"if-match", "if-unmodified-since"} & set(sent)], Bare.seen
    (entry,) = manifest_entries(tmp_path)
    assert entry["version"] == f"sha256:{digest}" and entry["checksum"]["hexdigest"] == digest, entry


def _b64(algorithm: str, data: bytes) -> str:
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


@pytest.mark.parametrize(
    ("header", "value", "algorithm"),
    [
        ("Repr-Digest", f"sha-512=:{_b64('sha512', SMALL)}:, sha-256=:{_b64('sha256', SMALL)}:", "sha512"),
        ("Digest", f"SHA-256={_b64('sha256', SMALL)}", "sha256"),
        ("Content-MD5", _b64("md5", SMALL), "md5"),
    ],
    ids=["repr-digest", "digest", "content-md5"],
)
def test_a_digest_the_server_sends_verifies_the_file(tmp_path: Path, header: str, value: str, algorithm: str):
    """RFC 9530's Repr-Digest (its first member the store reads), RFC 3230's Digest, and, for an answer carrying the
    whole file (this server ignores Range), its Content-MD5."""

    class Vouching(_Capture):
        seen: ClassVar[list[dict[str, str]]] = []
        version: ClassVar[dict[str, str]] = {"ETag": '"v1"', header: value}

    server = ThreadingHTTPServer(("127.0.0.1", 0), Vouching)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = fetch(f"http://127.0.0.1:{server.server_address[1]}/vouched.txt", tmp_path)
    finally:
        server.shutdown()
    ok(result)
    (entry,) = manifest_entries(tmp_path)
    assert entry["checksum"] == {"algorithm": algorithm, "hexdigest": hashlib.new(algorithm, SMALL).hexdigest()}
    assert not result.named("no digest")


def test_a_presigned_query_and_the_headers_show_nowhere(web: Nginx, tmp_path: Path):
    """The query (each of its values, and as a whole) and the headers' values: not in the logs, not in `.initializer/`,
    not in the error of a run that fails (a 404 here)."""
    query = f"?X-Amz-Credential=AKIAWEBTEST%2F20261208&X-Amz-Expires=300&X-Amz-Signature={SIGNATURE}"
    headers = json.dumps({"Authorization": f"Bearer {TOKEN}"})
    good = fetch(web.url("files/small.txt") + query, tmp_path / "good", HTTP_HEADERS=headers)
    ok(good)
    missing = fetch(web.url("files/absent.txt") + query, tmp_path / "missing", HTTP_HEADERS=headers)
    assert missing.code == 1 and "files/absent.txt?***" in missing.last["error"], missing.last
    said = [good.stderr, good.stdout, missing.stderr, missing.stdout]
    said += [p.read_text() for p in (tmp_path / "good" / ".initializer").rglob("*") if p.is_file()]
    for secret in (SIGNATURE, TOKEN, "AKIAWEBTEST", "X-Amz-Expires=300"):
        assert not [text for text in said if secret in text], secret
    assert landed(tmp_path / "good") == {"small.txt": SMALL}


def test_a_url_on_hf_endpoints_host_at_another_port_is_the_web_stores(web: Nginx, tmp_path: Path):
    """The Hub claims the pages of HF_ENDPOINT's host and port; another port of that host is another server."""
    ok(fetch(web.url("files/small.txt"), tmp_path, HF_ENDPOINT="http://127.0.0.1:9"))
    assert landed(tmp_path) == {"small.txt": SMALL}


def test_a_rerun_of_an_unchanged_file_fetches_nothing_even_signed_anew(web: Nginx, tmp_path: Path):
    """The file's place is its URL without the query: a presigned URL signed again names the same file."""
    ok(fetch(web.url("files/small.txt") + "?X-Amz-Signature=first", tmp_path))
    again = fetch(web.url("files/small.txt") + "?X-Amz-Signature=second", tmp_path)
    ok(again)
    assert again.last["fetched_files"] == 0 and again.last["files"] == 1, again.last


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("https://example.com/x#md5=0", "its fragment pins no digest"),
        (f"https://example.com/x#sha256={'0' * 63}", "its fragment pins no digest"),
        ("https://user:s3cr3tpw@example.com/x", "carries a user name or password"),
        ("https://example.com:99999/x", "is not a URL"),
    ],
)
def test_a_malformed_url_is_exit_2_naming_storage_uri(tmp_path: Path, uri: str, says: str):
    result = fetch(uri, tmp_path)
    assert result.code == 2 and result.last["error"].startswith("STORAGE_URI: ") and says in result.last["error"]
    assert "s3cr3tpw" not in result.stderr


def test_headers_that_are_the_initializers_own_are_refused(tmp_path: Path):
    result = fetch("https://example.com/x", tmp_path, HTTP_HEADERS='{"Range": "bytes=0-1"}')
    assert result.code == 2 and result.last["error"].startswith("HTTP_HEADERS: Range is the initializer's"), result.last
