"""The local Hub, checked with huggingface_hub's own client: what it downloads, which exceptions it raises, and the
redirects, ranges and hooks other tests rely on."""

from __future__ import annotations

import hashlib
import http.client
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from huggingface_hub import HfApi, RepoFile, RepoFolder, hf_hub_download, hf_hub_url
from huggingface_hub import snapshot_download as hf_snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from devkit.hubserver import ALL_REPOS, HubServer

pytestmark = pytest.mark.usefixtures("private_hf_client")

MODEL = "org/model"
BIG = random.Random(7).randbytes(11 * 1024 * 1024)  # LFS by size, whatever its name
MODEL_FILES = {
    "config.json": b'{"hidden_size": 8}\n',
    "nested/deep/tokenizer.json": b'{"vocab": {"a": 0}}\n',
    "empty.txt": b"",
    "model.safetensors": random.Random(8).randbytes(4096),  # LFS by suffix
    "weights/big.dat": BIG,  # added from a Path
}
LFS_PATHS = {"model.safetensors", "weights/big.dat"}
VERSIONS = "org/versions"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def folder_digests(folder: str | Path) -> dict[str, str]:
    """sha256 per file, the client's bookkeeping left out (digests keep failure diffs short)."""
    root = Path(folder)
    files = (p for p in root.rglob("*") if p.is_file() and ".cache" not in p.relative_to(root).parts)
    return {p.relative_to(root).as_posix(): sha256(p.read_bytes()) for p in files}


def digests(files: dict[str, bytes]) -> dict[str, str]:
    return {path: sha256(data) for path, data in files.items()}


def snapshot(hub: HubServer, tmp_path: Path, repo_id: str, token: str | bool = False, **kwargs: object) -> Path:
    """snapshot_download into tmp_path/out, with a cache of the test's own (a cached file would hide errors)."""
    folder = hf_snapshot_download(
        repo_id, endpoint=hub.endpoint, local_dir=tmp_path / "out", cache_dir=tmp_path / "cache", token=token, **kwargs
    )
    return Path(folder)


def fetch(
    hub: HubServer, tmp_path: Path, repo_id: str, filename: str, token: str | bool = False, **kwargs: object
) -> bytes:
    path = hf_hub_download(
        repo_id, filename, endpoint=hub.endpoint, cache_dir=tmp_path / "cache", token=token, **kwargs
    )
    return Path(path).read_bytes()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    big = tmp_path_factory.mktemp("sources") / "big.dat"
    big.write_bytes(BIG)
    with HubServer() as hub:
        hub.add_repo(MODEL, {**MODEL_FILES, "weights/big.dat": big})
        yield hub


@pytest.fixture
def hub(server: HubServer) -> HubServer:
    """The shared server with an empty log; tests change its hooks through monkeypatch, which restores them."""
    server.reset()
    return server


@pytest.fixture(scope="module")
def versions(server: HubServer) -> dict[str, str]:
    """A repo with history: main v1 -> v2, tag v1.0 at v1, branch feature/x from v1 with one more commit (v3)."""
    v1 = server.add_repo(VERSIONS, {"a.txt": b"one", "old.txt": b"old"})
    v2 = server.commit(VERSIONS, {"a.txt": b"two", "old.txt": None})
    server.tag(VERSIONS, "v1.0", v1)
    server.branch(VERSIONS, "feature/x", v1)
    v3 = server.commit(VERSIONS, {"b.txt": b"three"}, branch="feature/x")
    return {"v1": v1, "v2": v2, "v3": v3}


def test_snapshot_of_a_model_repo_equals_its_sources(hub: HubServer, tmp_path: Path) -> None:
    assert folder_digests(snapshot(hub, tmp_path, MODEL)) == digests(MODEL_FILES)


def test_dataset_repo(hub: HubServer, tmp_path: Path) -> None:
    files = {"README.md": b"# data\n", "data/train-00000-of-00001.parquet": bytes(range(256)) * 64}
    sha = hub.add_repo("org/dataset", files, repo_type="dataset")
    assert folder_digests(snapshot(hub, tmp_path, "org/dataset", repo_type="dataset")) == digests(files)
    paths = [request.path for request in hub.requests if request.origin == "hub"]
    assert paths[0] == "/api/datasets/org/dataset/revision/main"
    assert any(path.startswith(f"/datasets/org/dataset/resolve/{sha}/") for path in paths)
    assert HfApi(endpoint=hub.endpoint, token=False).dataset_info("org/dataset").sha == sha
    with pytest.raises(RepositoryNotFoundError):  # models and datasets are separate namespaces
        fetch(hub, tmp_path, "org/dataset", "README.md")


def test_revisions_by_branch_tag_and_sha(hub: HubServer, versions: dict[str, str], tmp_path: Path) -> None:
    assert fetch(hub, tmp_path, VERSIONS, "a.txt") == b"two"
    assert fetch(hub, tmp_path, VERSIONS, "a.txt", revision="v1.0") == b"one"
    assert fetch(hub, tmp_path, VERSIONS, "old.txt", revision=versions["v1"]) == b"old"
    assert fetch(hub, tmp_path, VERSIONS, "b.txt", revision="feature/x") == b"three"
    folder = snapshot(hub, tmp_path, VERSIONS, revision="feature/x")
    assert folder_digests(folder) == digests({"a.txt": b"one", "old.txt": b"old", "b.txt": b"three"})
    assert any(request.path.endswith("/revision/feature%2Fx") for request in hub.requests)
    api = HfApi(endpoint=hub.endpoint, token=False)
    expected = {"main": "v2", "v1.0": "v1", "feature/x": "v3", versions["v1"]: "v1"}
    assert {revision: api.repo_info(VERSIONS, revision=revision).sha for revision in expected} == {
        revision: versions[name] for revision, name in expected.items()
    }


def test_repo_info(hub: HubServer) -> None:
    info = HfApi(endpoint=hub.endpoint, token=False).model_info(MODEL, files_metadata=True)
    assert info.id == MODEL and info.private is False and info.gated is False and info.last_modified is not None
    assert info.sha is not None and len(info.sha) == 40
    siblings = {sibling.rfilename: sibling for sibling in info.siblings or []}
    assert set(siblings) == set(MODEL_FILES)
    assert {path for path, sibling in siblings.items() if sibling.lfs is not None} == LFS_PATHS
    big = siblings["weights/big.dat"].lfs
    assert big is not None and big.sha256 == sha256(BIG) and big.size == len(BIG)
    assert siblings["config.json"].size == len(MODEL_FILES["config.json"])


def test_tree_entries_follow_git_and_lfs(hub: HubServer) -> None:
    api = HfApi(endpoint=hub.endpoint, token=False)
    entries = {entry.path: entry for entry in api.list_repo_tree(MODEL, recursive=True)}
    folders = {path for path, entry in entries.items() if isinstance(entry, RepoFolder)}
    assert folders == {"nested", "nested/deep", "weights"}
    config, weights = entries["config.json"], entries["model.safetensors"]
    assert isinstance(config, RepoFile) and isinstance(weights, RepoFile)
    data = MODEL_FILES["config.json"]
    assert config.lfs is None and config.blob_id == git_blob_id(data)
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(MODEL_FILES['model.safetensors'])}\n"
    pointer += "size 4096\n"
    assert weights.lfs is not None and weights.lfs.sha256 == sha256(MODEL_FILES["model.safetensors"])
    assert weights.lfs.pointer_size == len(pointer) and weights.size == 4096
    assert weights.blob_id == git_blob_id(pointer.encode())
    assert all(entry.xet_hash is None for entry in entries.values() if isinstance(entry, RepoFile))
    top = {entry.path for entry in api.list_repo_tree(MODEL)}
    assert top == {"config.json", "empty.txt", "model.safetensors", "nested", "weights"}
    assert [entry.path for entry in api.list_repo_tree(MODEL, "nested")] == ["nested/deep"]
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(MODEL, "absent"))


def test_resolve_headers(hub: HubServer) -> None:
    regular = httpx2.head(hf_hub_url(MODEL, "config.json", endpoint=hub.endpoint))
    data = MODEL_FILES["config.json"]
    assert regular.status_code == 200 and regular.headers["Content-Length"] == str(len(data))
    assert regular.headers["ETag"] == f'"{git_blob_id(data)}"'
    assert regular.headers["Accept-Ranges"] == "bytes" and len(regular.headers["X-Repo-Commit"]) == 40
    lfs = httpx2.head(hf_hub_url(MODEL, "weights/big.dat", endpoint=hub.endpoint))
    assert lfs.status_code == 302 and lfs.headers["Location"].startswith(hub.cdn_endpoint + "/")
    assert lfs.headers["X-Linked-Etag"] == f'"{sha256(BIG)}"' and lfs.headers["X-Linked-Size"] == str(len(BIG))
    assert not any(name.lower().startswith("x-xet") for reply in (regular, lfs) for name in reply.headers)
    assert "xet-auth" not in lfs.headers.get("Link", "")


def test_tree_pagination(hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files = {f"part-{i}/file-{i}.txt": b"%d" % i for i in range(5)}
    hub.add_repo("org/many", files)
    monkeypatch.setattr(hub, "tree_page_size", 2)
    listed = [
        entry.path for entry in HfApi(endpoint=hub.endpoint, token=False).list_repo_tree("org/many", recursive=True)
    ]
    assert sorted(listed) == sorted([*files, *(f"part-{i}" for i in range(5))])
    pages = [request.path for request in hub.requests if "/tree/" in request.path]
    assert len(pages) == 5 and "cursor=" not in pages[0] and all("cursor=" in page for page in pages[1:])
    hub.reset()
    assert folder_digests(snapshot(hub, tmp_path, "org/many")) == digests(files)
    assert sum("/tree/" in request.path for request in hub.requests) == 5


def test_lfs_files_come_from_the_cdn_without_the_token(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(hub, "tokens", {"hf_reader": {ALL_REPOS}})
    assert folder_digests(snapshot(hub, tmp_path, MODEL, token="hf_reader")) == digests(MODEL_FILES)
    hub_requests = [request for request in hub.requests if request.origin == "hub"]
    cdn_requests = [request for request in hub.requests if request.origin == "cdn"]
    assert hub_requests and all(request.authorized for request in hub_requests)
    lfs_resolves = {(r.method, r.status) for r in hub_requests if r.path.endswith(("model.safetensors", "big.dat"))}
    assert lfs_resolves == {("HEAD", 302)}
    assert len(cdn_requests) == 2 and all(r.method == "GET" and r.status == 200 for r in cdn_requests)
    assert not any(request.authorized for request in cdn_requests)
    lfs_size = sum(len(MODEL_FILES[path]) for path in LFS_PATHS)
    assert hub.served_bytes == {"hub": sum(map(len, MODEL_FILES.values())) - lfs_size, "cdn": lfs_size}


def test_private_repo_needs_a_token_with_access(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub.add_repo("org/private", {"secret.txt": b"secret"}, private=True)
    monkeypatch.setattr(hub, "tokens", {"hf_owner": {"org/private"}, "hf_other": {MODEL}})
    assert fetch(hub, tmp_path, "org/private", "secret.txt", token="hf_owner") == b"secret"
    for token in (False, "hf_other"):
        with pytest.raises(RepositoryNotFoundError) as caught:
            fetch(hub, tmp_path / str(token), "org/private", "secret.txt", token=token)
        assert type(caught.value) is RepositoryNotFoundError  # hidden, not gated
        with pytest.raises(RepositoryNotFoundError):
            snapshot(hub, tmp_path / str(token), "org/private", token=token)
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub.endpoint, token=False).model_info("org/private")


def test_gated_repo_needs_access_for_files(hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub.add_repo("org/gated", {"model.safetensors": b"\0" * 64}, gated=True)
    monkeypatch.setattr(hub, "tokens", {"hf_granted": {"org/gated"}, "hf_pending": set()})
    for token, status in ((False, 401), ("hf_pending", 403)):
        with pytest.raises(GatedRepoError) as caught:
            snapshot(hub, tmp_path / str(token), "org/gated", token=token)
        assert caught.value.response.status_code == status
    assert fetch(hub, tmp_path, "org/gated", "model.safetensors", token="hf_granted") == b"\0" * 64
    assert HfApi(endpoint=hub.endpoint, token=False).model_info("org/gated").gated == "auto"  # metadata stays public


def test_unknown_token_is_refused(hub: HubServer, tmp_path: Path) -> None:
    calls = (
        lambda: fetch(hub, tmp_path, MODEL, "config.json", token="hf_bogus"),
        lambda: HfApi(endpoint=hub.endpoint, token="hf_bogus").model_info(MODEL),
    )
    for call in calls:
        with pytest.raises(HfHubHTTPError) as caught:
            call()
        assert not isinstance(caught.value, RepositoryNotFoundError)
        assert caught.value.response.status_code == 401 and "Invalid credentials" in str(caught.value)


def test_missing_repo_revision_and_file(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFoundError):
        fetch(hub, tmp_path, "org/absent", "config.json")
    with pytest.raises(RepositoryNotFoundError):
        snapshot(hub, tmp_path, "org/absent")
    with pytest.raises(RevisionNotFoundError):
        fetch(hub, tmp_path, MODEL, "config.json", revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        snapshot(hub, tmp_path, MODEL, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        HfApi(endpoint=hub.endpoint, token=False).model_info(MODEL, revision="0" * 40)
    with pytest.raises(RemoteEntryNotFoundError):
        fetch(hub, tmp_path, MODEL, "absent.txt")


def test_range_requests(hub: HubServer) -> None:
    location = httpx2.head(hf_hub_url(MODEL, "weights/big.dat", endpoint=hub.endpoint)).headers["Location"]
    size = len(BIG)
    for header, start, end in (("bytes=5-", 5, size), ("bytes=-10", size - 10, size), ("bytes=3-6", 3, 7)):
        reply = httpx2.get(location, headers={"Range": header})
        assert reply.status_code == 206 and reply.content == BIG[start:end]
        assert reply.headers["Content-Range"] == f"bytes {start}-{end - 1}/{size}"
    assert httpx2.get(location, headers={"Range": f"bytes={size}-"}).status_code == 416
    whole = httpx2.get(location)
    assert whole.status_code == 200 and whole.content == BIG
    regular = httpx2.get(hf_hub_url(MODEL, "config.json", endpoint=hub.endpoint), headers={"Range": "bytes=2-"})
    assert regular.status_code == 206 and regular.content == MODEL_FILES["config.json"][2:]


def test_corrupt_files_keep_their_size_only(hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    corrupted = {"model.safetensors", "config.json"}
    monkeypatch.setattr(hub, "corrupt", {(MODEL, path) for path in corrupted})
    folder = snapshot(hub, tmp_path, MODEL)  # the client checks sizes only, so this succeeds
    for path, data in MODEL_FILES.items():
        served = (folder / path).read_bytes()
        assert len(served) == len(data) and (served != data) == (path in corrupted)
    lfs = HfApi(endpoint=hub.endpoint, token=False).model_info(MODEL, files_metadata=True).siblings or []
    expected = next(sibling.lfs.sha256 for sibling in lfs if sibling.rfilename == "model.safetensors" and sibling.lfs)
    assert sha256((folder / "model.safetensors").read_bytes()) != expected  # what a verifying client would catch


def test_request_log_and_byte_counts(hub: HubServer, tmp_path: Path) -> None:
    snapshot(hub, tmp_path, MODEL)
    counts = Counter((request.origin, request.method) for request in hub.requests)
    # 1 revision + 1 tree; a HEAD per file; GETs for the 2 non-empty regular files (an empty one needs none).
    assert counts == {("hub", "GET"): 4, ("hub", "HEAD"): 5, ("cdn", "GET"): 2}
    assert sum(hub.served_bytes.values()) == sum(map(len, MODEL_FILES.values()))
    hub.reset()
    assert hub.requests == [] and hub.served_bytes == {"hub": 0, "cdn": 0}
    snapshot(hub, tmp_path, MODEL)  # up to date: the client only asks which commit main is
    assert [request.path for request in hub.requests] == [f"/api/models/{MODEL}/revision/main"]
    assert hub.served_bytes == {"hub": 0, "cdn": 0}


def test_throttle_and_a_client_leaving_mid_file(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "bytes_per_second", 4 * 1024 * 1024)
    location = httpx2.head(hf_hub_url(MODEL, "weights/big.dat", endpoint=hub.endpoint)).headers["Location"]
    started = time.monotonic()
    assert httpx2.get(location, headers={"Range": "bytes=0-1048575"}).content == BIG[: 1024 * 1024]
    assert time.monotonic() - started >= 0.2
    with httpx2.stream("GET", location) as reply:
        next(reply.iter_bytes(64 * 1024))  # then hang up with most of the file unsent
    monkeypatch.setattr(hub, "bytes_per_second", None)
    assert httpx2.get(hf_hub_url(MODEL, "config.json", endpoint=hub.endpoint)).status_code == 200
    assert hub.served_bytes["cdn"] < 1024 * 1024 + len(BIG) // 2


#: A hang guard for the server to end a connection, far above the milliseconds it takes; never a performance bound.
HANG_GUARD = 60


def _handlers() -> set[threading.Thread]:
    """The threads serving a connection each (socketserver's, named after their target)."""
    return {thread for thread in threading.enumerate() if thread.name.endswith("(process_request_thread)")}


def _reset(connection: http.client.HTTPConnection) -> None:
    """Hang up with a reset (RST, SO_LINGER 0), as the kernel of a killed client does."""
    assert connection.sock is not None
    connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


@pytest.mark.parametrize("when", ["mid-answer", "between-requests"])
def test_a_client_going_away_prints_nothing(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], when: str
) -> None:
    """`make serve` printed a ConnectionResetError traceback each time a program stopped mid-file, or closed its
    kept-alive connections with a reset."""
    monkeypatch.setattr(hub, "bytes_per_second", 1024 * 1024)  # BIG takes seconds: the reset comes mid-answer
    cdn = urlsplit(httpx2.head(hf_hub_url(MODEL, "weights/big.dat", endpoint=hub.endpoint)).headers["Location"])
    before = _handlers()
    if when == "mid-answer":
        client = http.client.HTTPConnection(cdn.netloc)
        client.request("GET", f"{cdn.path}?{cdn.query}")
        deadline = time.monotonic() + HANG_GUARD
        while not hub.served_bytes["cdn"] and time.monotonic() < deadline:  # until the answer has begun
            time.sleep(0.01)
        assert hub.served_bytes["cdn"]
    else:
        client = http.client.HTTPConnection(urlsplit(hub.endpoint).netloc)
        client.request("GET", f"/{MODEL}/resolve/main/config.json")
        assert client.getresponse().read() == MODEL_FILES["config.json"]  # the connection is kept alive, idle
    (serving,) = _handlers() - before
    _reset(client)
    serving.join(HANG_GUARD)  # the server has handled the reset: the connection's thread has ended
    assert not serving.is_alive()
    assert capfd.readouterr().err == ""
    assert hub.served_bytes["cdn"] < len(BIG)


def test_a_real_error_in_a_handler_is_still_printed(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hub, "tree_page_size", None)  # a TypeError in the handler
    with pytest.raises(httpx2.RemoteProtocolError):  # the server hangs up once it has printed the error
        httpx2.get(f"{hub.endpoint}/api/models/{MODEL}/tree/main")
    error = capfd.readouterr().err
    assert "Traceback" in error and "TypeError" in error


def test_unknown_paths_are_json_404s(hub: HubServer) -> None:
    for path in ("/api/agent-harnesses", "/api/spaces/org/space", f"/api/models/{MODEL}/commits/main", "/nowhere"):
        reply = httpx2.get(hub.endpoint + path)
        assert reply.status_code == 404 and "error" in reply.json() and "X-Error-Message" in reply.headers


def test_repo_api_rejects_misuse(hub: HubServer) -> None:
    with pytest.raises(ValueError, match="exists already"):
        hub.add_repo(MODEL)
    for files in ({"../escape": b""}, {"a//b": b""}, {"a": b"", "a/b": b""}):
        with pytest.raises(ValueError):
            hub.add_repo("org/misuse", files)
    with pytest.raises(KeyError):
        hub.commit(MODEL, {"x": b""}, branch="absent")
    with pytest.raises(KeyError):
        hub.commit(MODEL, {"absent.txt": None})
    with pytest.raises(KeyError):
        hub.tag(MODEL, "v0", "f" * 40)


def test_lifecycle_and_path_sources(tmp_path: Path) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"w" * 1000)
    with HubServer() as other:
        other.add_repo("org/copies", {"a.bin": source, "b.bin": b"w" * 1000})
        assert sum(path.is_file() for path in other.root.rglob("*")) == 1  # one content-addressed copy
        assert folder_digests(snapshot(other, tmp_path, "org/copies")) == digests(
            {"a.bin": b"w" * 1000, "b.bin": b"w" * 1000}
        )
        root, endpoint = other.root, other.endpoint
    assert not root.exists() and source.read_bytes() == b"w" * 1000
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(endpoint)


def test_tls_serves_both_origins_over_https_with_a_certificate_of_its_own(tmp_path: Path) -> None:
    """`tls`: the API and the CDN (through the API's redirect) answer over HTTPS alone, to a client trusting the run's
    certificate; a client trusting only the system's CAs is refused by both."""
    import ssl

    with HubServer(tls=True, parent=tmp_path) as hub:
        hub.add_repo(MODEL, {"weights/big.dat": BIG})
        assert hub.certificate is not None and hub.endpoint.startswith("https://")
        assert hub.cdn_endpoint.startswith("https://")
        url = hf_hub_url(MODEL, "weights/big.dat", endpoint=hub.endpoint)
        trusting = ssl.create_default_context(cafile=hub.certificate)
        with httpx2.Client(verify=trusting, follow_redirects=True) as client:
            reply = client.get(url)
        assert reply.status_code == 200 and reply.content == BIG
        assert [(r.origin, r.status) for r in hub.requests] == [("hub", 302), ("cdn", 200)]
        for endpoint in (hub.endpoint, hub.cdn_endpoint):
            with httpx2.Client(verify=ssl.create_default_context()) as client, pytest.raises(httpx2.ConnectError):
                client.get(f"{endpoint}/api/models/{MODEL}")
