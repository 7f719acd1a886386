"""A local HuggingFace Hub speaking the protocol huggingface_hub 2.x downloads with: for tests, demo, benchmarks.

What the client needs, and gets here as from the real Hub: revision info, paginated tree listings, HEAD/GET on
`resolve` with `X-Repo-Commit`, `ETag`/`X-Linked-Etag` and `X-Linked-Size`, LFS files redirected to a second "CDN"
origin (so the client drops its token there), Range requests, and the `X-Error-Code`/`X-Error-Message` replies it
turns into its exceptions. No Xet header is ever sent, so the client stays on plain HTTP.

Repos are made from Python. File bytes are hashed once, when added, into a content-addressed store, and responses
stream from disk. Tests can read a request log, count served file bytes, slow bodies down and corrupt chosen files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import SplitResult, parse_qs, unquote, urlencode, urlsplit

from devkit.relay import self_signed_certificate, serving_context
from devkit.serving import NoDelay

RepoType = Literal["model", "dataset"]
Source = bytes | Path

LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub stores files this large with LFS whatever their name
LFS_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".gguf", ".onnx", ".parquet"})
ALL_REPOS = "*"  # in a token's set of repo ids: the token may read every repo
CHUNK_SIZE = 1024 * 1024
DEFAULT_TREE_PAGE_SIZE = 1000  # the Hub's page size for tree listings without `expand`
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"  # the client matches this exact message


def is_lfs(path: str, size: int) -> bool:
    """Whether the Hub keeps this file in LFS (by size or by name, as its default .gitattributes does)."""
    return size >= LFS_THRESHOLD or PurePosixPath(path).suffix in LFS_SUFFIXES


_FLIP = bytes(byte ^ 0xFF for byte in range(256))  # corrupts every byte, keeps the length
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass(frozen=True)
class LoggedRequest:
    """One answered request, for tests to assert on traffic (what was asked, from where, with a token or not)."""

    method: str
    origin: str  # "hub" or "cdn"
    path: str  # as sent: percent-encoded, with the query
    authorized: bool  # an Authorization header was sent
    status: int


@dataclass(frozen=True)
class _Blob:
    path: Path
    size: int
    sha1: str  # git blob id of the content
    sha256: str


@dataclass(frozen=True)
class _File:
    blob: _Blob
    oid: str  # git blob id in the tree: of the content, or of the LFS pointer
    pointer_size: int | None  # None for a regular (non-LFS) file

    @property
    def lfs(self) -> bool:
        return self.pointer_size is not None

    @property
    def etag(self) -> str:
        """The Hub's ETag: the content's git blob id for regular files, its sha256 for LFS files."""
        return self.blob.sha256 if self.lfs else self.blob.sha1

    def tree_entry(self, path: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.oid, "size": self.blob.size, "path": path}
        if self.lfs:
            entry["lfs"] = {"oid": self.blob.sha256, "size": self.blob.size, "pointerSize": self.pointer_size}
        return entry


@dataclass(frozen=True)
class _Commit:
    sha: str
    date: str
    files: dict[str, _File]
    listing: list[dict[str, Any]]  # tree entries of every file and directory, sorted by path
    paths: list[str]  # the listing's paths, for bisection
    children: dict[str, list[dict[str, Any]]]  # directory ("" for the root) -> entries directly in it

    def entries_under(self, directory: str, recursive: bool) -> list[dict[str, Any]] | None:
        """What the tree endpoint lists for `directory`, or None if it is not a directory of this commit."""
        if directory not in self.children:
            return None
        if not recursive:
            return self.children[directory]
        if not directory:
            return self.listing
        # Paths under "d/" are contiguous in sorted order, up to "d0" ("0" follows "/").
        return self.listing[bisect_left(self.paths, directory + "/") : bisect_left(self.paths, directory + "0")]


@dataclass
class _Repo:
    repo_id: str
    private: bool
    gated: bool
    created: str
    commits: dict[str, _Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> _Commit | None:
        """A branch, a tag or a full commit sha (short shas and `refs/pr/N` are not served)."""
        return self.commits.get(self.branches.get(revision) or self.tags.get(revision) or revision)

    def info(self, commit: _Commit, blobs: bool) -> dict[str, Any]:
        """The repo info JSON; `blobs` adds the per-file metadata `repo_info(files_metadata=True)` asks for."""
        siblings = []
        for path, file in sorted(commit.files.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling.update(size=file.blob.size, blobId=file.oid)
                if file.lfs:
                    sibling["lfs"] = {
                        "sha256": file.blob.sha256,
                        "size": file.blob.size,
                        "pointerSize": file.pointer_size,
                    }
            siblings.append(sibling)
        return {
            "id": self.repo_id,
            "author": self.repo_id.partition("/")[0],
            "sha": commit.sha,
            "private": self.private,
            "gated": "auto" if self.gated else False,
            "disabled": False,
            "lastModified": commit.date,
            "createdAt": self.created,
            "tags": [],
            "downloads": 0,
            "likes": 0,
            "siblings": siblings,
        }


def _git_object_id(kind: str, content: bytes) -> str:
    digest = hashlib.sha1(f"{kind} {len(content)}\0".encode())
    digest.update(content)
    return digest.hexdigest()


def _git_tree_id(members: dict[str, tuple[str, str]]) -> str:
    """Git's id of a tree of name -> (mode, oid): entries sorted by name, a directory's name as if it ended in "/"."""
    names = sorted(members, key=lambda name: name + "/" if members[name][0] == "40000" else name)
    return _git_object_id(
        "tree", b"".join(f"{members[n][0]} {n}\0".encode() + bytes.fromhex(members[n][1]) for n in names)
    )


def _hash_file(path: Path) -> tuple[int, str, str]:
    """Size, git blob id and sha256 of a file, in one streaming pass (inputs may be GiBs)."""
    size = path.stat().st_size
    sha1, sha256 = hashlib.sha1(f"blob {size}\0".encode()), hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK_SIZE):
            sha1.update(chunk)
            sha256.update(chunk)
    return size, sha1.hexdigest(), sha256.hexdigest()


def _repo_path(path: str) -> str:
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError(f"not a valid path in a repo: {path!r}")
    return path


def _build_commit(files: dict[str, _File], parent: str | None, serial: int) -> _Commit:
    """A commit with git's tree and commit ids; `serial` keeps commits of identical trees apart."""
    directories = {""}
    for path in files:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: depth + 1]) for depth in range(len(parts)))
    if clash := directories & files.keys():
        raise ValueError(f"paths both files and directories: {sorted(clash)}")
    members: dict[str, dict[str, tuple[str, str]]] = {directory: {} for directory in directories}
    for path, file in files.items():
        directory, _, name = path.rpartition("/")
        members[directory][name] = ("100644", file.oid)
    tree_ids: dict[str, str] = {}
    for directory in sorted(directories, key=lambda d: d.count("/") + 1 if d else 0, reverse=True):  # deepest first
        tree_ids[directory] = _git_tree_id(members[directory])
        if directory:
            parent_directory, _, name = directory.rpartition("/")
            members[parent_directory][name] = ("40000", tree_ids[directory])
    now = datetime.now(UTC)
    signature = f"HubServer <hubserver@localhost> {int(now.timestamp())} +0000"
    parents = [f"parent {parent}"] if parent else []
    text = "\n".join(
        [f"tree {tree_ids['']}", *parents, f"author {signature}", f"committer {signature}", "", f"#{serial}\n"]
    )
    sha = _git_object_id("commit", text.encode())
    listing = [file.tree_entry(path) for path, file in files.items()]
    listing += [{"type": "directory", "oid": tree_ids[d], "size": 0, "path": d} for d in directories if d]
    listing.sort(key=lambda entry: entry["path"])
    children: dict[str, list[dict[str, Any]]] = {directory: [] for directory in directories}
    for entry in listing:
        children[entry["path"].rpartition("/")[0]].append(entry)
    date = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return _Commit(sha, date, dict(files), listing, [entry["path"] for entry in listing], children)


def _requested_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end) asked by a single-range `Range` header; None if absent or not one valid range (served whole).

    start >= end means unsatisfiable (416).
    """
    match = _RANGE.fullmatch(header.strip()) if header else None
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # the last N bytes; N = 0 is unsatisfiable
        suffix = int(last)
        return (max(size - suffix, 0), size) if suffix else (size, size)
    start = int(first)
    if not last:
        return start, size
    if int(last) < start:
        return None
    return start, min(int(last) + 1, size)


class _Origin(NoDelay, ThreadingHTTPServer):
    """One of the two origins; it tracks open connections so that stopping ends idle keep-alive ones too."""

    daemon_threads = True

    def __init__(self, hub: HubServer, name: str, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.hub, self.name = hub, name
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._connections_lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):  # already closed by the client
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every reply carries a Content-Length
    disable_nagle_algorithm = True  # headers and body go in separate writes
    server: _Origin

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        headers = getattr(self, "headers", None)  # unset (as `path` may be) when the request line itself was bad
        authorized = headers is not None and "Authorization" in headers
        request = LoggedRequest(self.command or "", self.server.name, getattr(self, "path", ""), authorized, int(code))
        self.server.hub._record(request)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the request log replaces the stderr lines."""

    def _serve(self) -> None:
        """A client gone mid-reply ends the connection quietly (devkit.serving.QuietDisconnects)."""
        if self.server.name == "cdn":
            self._cdn()
        else:
            self._hub()

    def _hub(self) -> None:
        hub = self.server.hub
        token = self._token()
        url = urlsplit(self.path)
        parts = url.path.split("/")[1:]
        if token is not None and token not in hub.tokens:
            self._error(401, INVALID_CREDENTIALS)
        elif len(parts) >= 4 and parts[0] == "api" and parts[1] in ("models", "datasets"):
            repo_type: RepoType = "model" if parts[1] == "models" else "dataset"
            self._api(repo_type, f"{unquote(parts[2])}/{unquote(parts[3])}", parts[4:], token, url)
        elif len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            self._resolve("dataset", f"{unquote(parts[1])}/{unquote(parts[2])}", parts[4:], token)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve("model", f"{unquote(parts[0])}/{unquote(parts[1])}", parts[3:], token)
        else:
            self._error(404, "Sorry, we can't find the page you are looking for.")

    def _api(self, repo_type: RepoType, repo_id: str, rest: list[str], token: str | None, url: SplitResult) -> None:
        query = parse_qs(url.query)
        if not rest or (len(rest) == 2 and rest[0] == "revision"):
            revision = unquote(rest[1]) if rest else "main"
            if found := self._checkout(repo_type, repo_id, revision, token, files=False):
                repo, commit = found
                self._json(200, repo.info(commit, blobs=query.get("blobs", [""])[0].lower() == "true"))
        elif len(rest) >= 2 and rest[0] == "tree":
            if found := self._checkout(repo_type, repo_id, unquote(rest[1]), token, files=False):
                self._tree(found[1], unquote("/".join(rest[2:])).strip("/"), url, query)
        else:
            self._error(404, "Sorry, we can't find the page you are looking for.")

    def _tree(self, commit: _Commit, directory: str, url: SplitResult, query: dict[str, list[str]]) -> None:
        entries = commit.entries_under(directory, recursive=query.get("recursive", [""])[0].lower() == "true")
        cursor = query.get("cursor", ["0"])[0]
        if entries is None:
            self._error(404, f"Entry not found: {directory!r} is not a directory of {commit.sha}", "EntryNotFound")
        elif not cursor.isdigit():
            self._error(400, f"Invalid cursor: {cursor!r}")
        else:
            start, size = int(cursor), self.server.hub.tree_page_size
            headers = {}
            if start + size < len(entries):
                next_query = urlencode({**query, "cursor": [str(start + size)]}, doseq=True)
                headers["Link"] = f'<{self.server.hub.endpoint}{url.path}?{next_query}>; rel="next"'
            self._json(200, entries[start : start + size], headers)

    def _resolve(self, repo_type: RepoType, repo_id: str, rest: list[str], token: str | None) -> None:
        hub = self.server.hub
        found = self._checkout(repo_type, repo_id, unquote(rest[0]), token, files=True)
        if found is None:
            return
        commit = found[1]
        path = unquote("/".join(rest[1:]))
        file = commit.files.get(path)
        if file is None:
            self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.sha})
            return
        etag = f'"{file.etag}"'
        headers = {
            "X-Repo-Commit": commit.sha,
            "ETag": etag,
            "X-Linked-Etag": etag,
            "X-Linked-Size": str(file.blob.size),
        }
        if file.lfs:
            cdn = hub.cdn_public_endpoint or hub.cdn_endpoint
            location = f"{cdn}/lfs/{file.blob.sha256}?{urlencode({'repo': repo_id, 'file': path})}"
            self._reply(302, {**headers, "Location": location, "Content-Length": "0"})
        else:
            self._send_blob(file.blob, (repo_id, path) in hub.corrupt, headers)

    def _cdn(self) -> None:
        """Blobs by sha256, no auth, as a CDN's signed URLs; the query names the file only for `corrupt`."""
        hub = self.server.hub
        url = urlsplit(self.path)
        parts = url.path.split("/")[1:]
        blob = hub._blobs.get(parts[1]) if len(parts) == 2 and parts[0] == "lfs" else None
        if blob is None:
            self._error(404, "NoSuchKey")
            return
        query = parse_qs(url.query)
        corrupt = (query.get("repo", [""])[0], query.get("file", [""])[0]) in hub.corrupt
        self._send_blob(blob, corrupt, {"ETag": f'"{blob.sha256}"'})

    def _token(self) -> str | None:
        """The bearer token sent, if any; a malformed Authorization header counts as an unknown token."""
        value = self.headers.get("Authorization")
        if value is None:
            return None
        scheme, _, token = value.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else value

    def _open(self, repo_type: RepoType, repo_id: str, token: str | None, files: bool) -> _Repo | None:
        """The repo if the token may see it (and read its `files`), else None once the Hub's error is sent.

        As on the Hub, a private repo is hidden (RepoNotFound), while a gated repo's metadata and tree stay public and
        only its files need access.
        """
        hub = self.server.hub
        repo = hub._repos.get((repo_type, repo_id))
        allowed = token is not None and not hub.tokens.get(token, set()).isdisjoint({ALL_REPOS, repo_id})
        if repo is None or (repo.private and not allowed):
            self._error(401, "Repository not found", "RepoNotFound")
            return None
        if files and repo.gated and not allowed:
            if token is None:
                message = f"You must be authenticated to access it. Access to {repo_type} {repo_id} is restricted."
                self._error(401, message, "GatedRepo")
            else:
                message = f"Access to {repo_type} {repo_id} is restricted and you are not in the authorized list."
                self._error(403, message, "GatedRepo")
            return None
        return repo

    def _checkout(
        self, repo_type: RepoType, repo_id: str, revision: str, token: str | None, files: bool
    ) -> tuple[_Repo, _Commit] | None:
        """The repo and the commit `revision` names, or None once the Hub's error is sent."""
        repo = self._open(repo_type, repo_id, token, files)
        if repo is None:
            return None
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
            return None
        return repo, commit

    def _send_blob(self, blob: _Blob, corrupt: bool, headers: dict[str, str]) -> None:
        span = _requested_range(self.headers.get("Range"), blob.size) if self.server.hub.honour_ranges else None
        if span is not None and span[0] >= span[1]:
            self._error(416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{blob.size}"})
            return
        start, end = span or (0, blob.size)
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        headers["Content-Length"] = str(end - start)
        if span is not None:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
        self._reply(206 if span is not None else 200, headers)
        if self.command == "GET":
            self._stream(blob.path, start, end - start, corrupt)

    def _stream(self, path: Path, offset: int, length: int, corrupt: bool) -> None:
        """Sendfile when possible; chunked writes when throttled or corrupting (the rate is read once per response)."""
        hub, origin = self.server.hub, self.server.name
        rate, sent, started = hub.bytes_per_second, 0, time.monotonic()
        with path.open("rb") as source:
            if rate is None and not corrupt:
                while sent < length and (allowed := hub._allowance(min(CHUNK_SIZE, length - sent))):
                    count = self.connection.sendfile(source, offset + sent, allowed)
                    if not count:
                        break
                    sent += count
                    hub._count(origin, count)
                return
            source.seek(offset)
            chunk_size = CHUNK_SIZE if rate is None else max(1, min(CHUNK_SIZE, int(rate / 10)))
            while (
                sent < length
                and (allowed := hub._allowance(min(chunk_size, length - sent)))
                and (chunk := source.read(allowed))
            ):
                self.wfile.write(chunk.translate(_FLIP) if corrupt else chunk)
                sent += len(chunk)
                hub._count(origin, len(chunk))
                if rate is not None and (delay := sent / rate - (time.monotonic() - started)) > 0:
                    time.sleep(delay)

    def _reply(self, status: int, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        json_headers = {"Content-Type": "application/json; charset=utf-8", "Content-Length": str(len(body))}
        self._reply(status, {**json_headers, **(headers or {})})
        if self.command == "GET":
            self.wfile.write(body)

    def _error(
        self, status: int, message: str, code: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        """A Hub error: the client picks its exception from X-Error-Code (or the message), and shows the JSON error."""
        error_headers = {"X-Error-Message": message.encode("ascii", "backslashreplace").decode(), **(headers or {})}
        if code is not None:
            error_headers["X-Error-Code"] = code
        self._json(status, {"error": message}, error_headers)


class HubServer:
    """The Hub API origin (`endpoint`) and a CDN origin (`cdn_endpoint`) on loopback, sharing one temp folder.

    Hooks, all safe to change while serving:
    - `tokens`: token -> repo ids it may read (`ALL_REPOS` for every repo); any other token is refused.
    - `corrupt`: (repo_id, path) pairs served as different bytes of the same length, from both origins.
    - `bytes_per_second`: throttle of each file body, so a test can kill a client mid-file.
    - `pause_after_bytes`: once both origins have sent this many file body bytes (since the last `reset`), bodies
      stop until it is set back to None, so a test can stop a client at a known point mid-file whatever the load.
    - `tree_page_size`: entries per tree page, so a test can make the client follow `Link` headers.
    - `cdn_public_endpoint`: the CDN base put in LFS redirects instead of `cdn_endpoint`, so a test can send the
      client's CDN downloads through a relay.

    `tls`: both origins serve HTTPS only, with a certificate made for the run (`certificate`, its own CA; clients trust
    it through SSL_CERT_FILE, which huggingface_hub's httpx2 and our program's HUB_TRUST read), as the Hub and its CDN
    are served. Each connection's handshake runs in its own handler thread, so a slow client holds up no other.
    """

    def __init__(
        self, port: int | None = None, cdn_port: int | None = None, parent: Path | None = None, tls: bool = False
    ) -> None:
        self.tokens: dict[str, set[str]] = {}
        self.corrupt: set[tuple[str, str]] = set()
        self.bytes_per_second: float | None = None
        self.pause_after_bytes: int | None = None
        self.tree_page_size = DEFAULT_TREE_PAGE_SIZE
        self.cdn_public_endpoint: str | None = None
        self.honour_ranges = True  # False: answer every Range with the whole file (200), as olah does
        self.root = Path(tempfile.mkdtemp(prefix="hubserver-", dir=parent))  # under `parent`, else the temp folder
        self._blob_dir = self.root / "blobs"
        self._blob_dir.mkdir()
        self._blobs: dict[str, _Blob] = {}  # by sha256
        self._repos: dict[tuple[RepoType, str], _Repo] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # ends a pause (`pause_after_bytes`) when the hub stops
        self._log: list[LoggedRequest] = []
        self._served = {"hub": 0, "cdn": 0}
        self._serial = 0
        self._origins = (_Origin(self, "hub", port or 0), _Origin(self, "cdn", cdn_port or 0))
        self.certificate: Path | None = None
        if tls:
            self.certificate, key = self_signed_certificate(self.root)
            context = serving_context(self.certificate, key)
            for origin in self._origins:
                # The handshake on the connection's first read, in its handler thread, not in the accepting one.
                origin.socket = context.wrap_socket(origin.socket, server_side=True, do_handshake_on_connect=False)
        scheme = "https" if tls else "http"
        self.endpoint = f"{scheme}://127.0.0.1:{self._origins[0].server_port}"
        self.cdn_endpoint = f"{scheme}://127.0.0.1:{self._origins[1].server_port}"
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> HubServer:
        self._threads = [threading.Thread(target=origin.serve_forever, daemon=True) for origin in self._origins]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop both origins, end their open connections and delete the temp folder."""
        self._stopping.set()
        for origin in self._origins:
            if self._threads:
                origin.shutdown()
            origin.server_close()
        self.drop_connections()
        self._threads = []
        shutil.rmtree(self.root, ignore_errors=True)

    def drop_connections(self) -> None:
        """End every open connection of both origins: those of a killed client too, whose answer would otherwise go
        on (and be counted) once a pause is lifted, until the write that finds the peer gone."""
        for origin in self._origins:
            origin.drop_connections()

    def add_repo(
        self,
        repo_id: str,
        files: Mapping[str, Source] | None = None,
        *,
        repo_type: RepoType = "model",
        private: bool = False,
        gated: bool = False,
    ) -> str:
        """Create `org/name` with one commit of `files` on branch `main`; returns its sha.

        Path sources are hard-linked into the store when possible: do not rewrite them in place afterwards.
        """
        org, _, name = repo_id.partition("/")
        if not org or not name or "/" in name:
            raise ValueError(f"repo ids are org/name, not {repo_id!r}")
        tree = {_repo_path(path): self._file(path, source) for path, source in (files or {}).items()}
        created = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        with self._lock:
            if (repo_type, repo_id) in self._repos:
                raise ValueError(f"the {repo_type} repo {repo_id} exists already")
            repo = _Repo(repo_id, private, gated, created)
            repo.branches["main"] = self._add_commit(repo, tree, parent=None)
            self._repos[(repo_type, repo_id)] = repo
            return repo.branches["main"]

    def commit(
        self, repo_id: str, files: Mapping[str, Source | None], *, branch: str = "main", repo_type: RepoType = "model"
    ) -> str:
        """Commit changes on top of `branch`'s head and move the branch; returns the new sha.

        `files` holds only the changes: a source adds or replaces a path, None deletes it.
        """
        changes = {
            _repo_path(path): None if source is None else self._file(path, source) for path, source in files.items()
        }
        with self._lock:
            repo = self._repo(repo_type, repo_id)
            if branch not in repo.branches:
                raise KeyError(f"no branch {branch!r} in {repo_id}: create it with branch()")
            tree = dict(repo.commits[repo.branches[branch]].files)
            for path, file in changes.items():
                if file is not None:
                    tree[path] = file
                elif tree.pop(path, None) is None:
                    raise KeyError(f"cannot delete {path!r}: not in {repo_id}@{branch}")
            repo.branches[branch] = self._add_commit(repo, tree, parent=repo.branches[branch])
            return repo.branches[branch]

    def branch(self, repo_id: str, name: str, sha: str, *, repo_type: RepoType = "model") -> str:
        """Create or move branch `name` (it may contain "/") to `sha` (or to what a branch or tag points to)."""
        with self._lock:
            repo = self._repo(repo_type, repo_id)
            repo.branches[name] = self._sha(repo, sha)
            return repo.branches[name]

    def tag(self, repo_id: str, tag: str, sha: str, *, repo_type: RepoType = "model") -> str:
        """Create or move tag `tag` to `sha` (or to what a branch or tag points to)."""
        with self._lock:
            repo = self._repo(repo_type, repo_id)
            repo.tags[tag] = self._sha(repo, sha)
            return repo.tags[tag]

    @property
    def requests(self) -> list[LoggedRequest]:
        """Requests answered by both origins so far, in order (a copy)."""
        with self._lock:
            return list(self._log)

    @property
    def served_bytes(self) -> dict[str, int]:
        """File body bytes sent per origin ("hub", "cdn"); JSON replies are not counted."""
        with self._lock:
            return dict(self._served)

    def reset(self) -> None:
        """Forget the request log and the byte counters."""
        with self._lock:
            self._log.clear()
            self._served = dict.fromkeys(self._served, 0)

    def _record(self, request: LoggedRequest) -> None:
        with self._lock:
            self._log.append(request)

    def _allowance(self, wanted: int) -> int:
        """How many of `wanted` body bytes may go now: all of them, unless `pause_after_bytes` is reached, when this
        waits until the pause is lifted (0 when the hub stops meanwhile: the answer ends short)."""
        while (limit := self.pause_after_bytes) is not None:
            if (room := limit - sum(self.served_bytes.values())) > 0:
                return min(wanted, room)
            if self._stopping.wait(0.05):  # the pause is lifted by setting the attribute: looked at again shortly
                return 0
        return wanted

    def _count(self, origin: str, size: int) -> None:
        with self._lock:
            self._served[origin] += size

    def _repo(self, repo_type: RepoType, repo_id: str) -> _Repo:
        try:
            return self._repos[(repo_type, repo_id)]
        except KeyError:
            raise KeyError(f"no {repo_type} repo {repo_id}") from None

    def _sha(self, repo: _Repo, revision: str) -> str:
        commit = repo.resolve(revision)
        if commit is None:
            raise KeyError(f"no revision {revision!r} in {repo.repo_id}")
        return commit.sha

    def _add_commit(self, repo: _Repo, tree: dict[str, _File], parent: str | None) -> str:
        self._serial += 1
        commit = _build_commit(tree, parent, self._serial)
        repo.commits[commit.sha] = commit
        return commit.sha

    def _file(self, path: str, source: Source) -> _File:
        """Store the bytes once and decide, as the Hub's .gitattributes would, whether the file is in LFS."""
        blob = self._store(source)
        if not is_lfs(path, blob.size):
            return _File(blob, blob.sha1, None)
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{blob.sha256}\nsize {blob.size}\n".encode()
        return _File(blob, _git_object_id("blob", pointer), len(pointer))

    def _store(self, source: Source) -> _Blob:
        if isinstance(source, Path):
            size, sha1, sha256 = _hash_file(source)
        else:
            size, sha1, sha256 = len(source), _git_object_id("blob", source), hashlib.sha256(source).hexdigest()
        target = self._blob_dir / sha256
        if not target.exists():
            staging = self._blob_dir / f".{sha256}.{threading.get_ident()}"
            if isinstance(source, Path):
                try:
                    os.link(source, staging)
                except OSError:  # another filesystem, or links not allowed
                    shutil.copyfile(source, staging)
            else:
                staging.write_bytes(source)
            staging.replace(target)
        with self._lock:
            return self._blobs.setdefault(sha256, _Blob(target, size, sha1, sha256))
