"""The HuggingFace Hub source: huggingface_hub's own client resolves and lists; `get` fetches the bytes. The revision is
resolved to one commit up front, so every file comes from it; the engine checks each file's digest from the tree listing
before the file takes its final name (huggingface_hub checks only sizes). huggingface_hub keeps nothing on disk, so
nothing needs a writable HOME; of HF_HOME it reads only the token `hf auth login` saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from typing import Any

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.config.contract import Config, Kind
from initializers.sources.http.objects import ObjectRead, ObjectStorage
from initializers.sources.hub import library
from initializers.sources.hub.get import BAD_TOKEN, HUB_TRUST, HubGetter, gated, hub_transient, not_found
from initializers.sources.hub.guard import HubGuard
from initializers.sources.hub.location import HfLocation
from initializers.sources.hub.options import HubOptions
from initializers.store import answers
from initializers.store.contract import PART_SIZE, comes_whole
from initializers.store.hashers import SHA256, Hasher, HashKind, kinds
from initializers.store.retry import Retriable, retrying, untrusted_certificate

_log = logs.get_logger("initializers.hf")
#: Git's blob id, the Hub's id of a file not in LFS: sha1 over a "blob <size>" header, a NUL, and the content.
GIT_SHA1 = "git-sha1"


def _git_blob_hasher(size: int) -> Hasher:
    hasher = hashlib.sha1(usedforsecurity=False)
    hasher.update(b"blob %d\0" % size)
    return hasher


GIT_BLOB_ID = HashKind(GIT_SHA1, _git_blob_hasher)


class HfSource(ObjectStorage):
    """A repo at one revision, resolved to its commit, listed through huggingface_hub and read by resolve GETs."""

    pins_versions = True  # every file is read at the commit the revision resolved to once
    checksum_kinds = kinds(SHA256, GIT_BLOB_ID)  # sha256 for LFS files, the git blob id otherwise

    def __init__(self, location: HfLocation, config: Config, kind: Kind) -> None:
        self.location = location
        self.repo_type = kind.name  # "dataset" or "model": the program decides what the repo is
        options = config.options(HubOptions)
        self.revision = location.revision or options.revision or "main"
        huggingface_hub = library.huggingface_hub()
        import httpx2  # huggingface_hub's HTTP client: its transport errors are the network failures

        token = options.access_token or _saved_token(huggingface_hub)
        self._hub = huggingface_hub
        self._transport_errors = httpx2.TransportError
        self._too_many_redirects = httpx2.TooManyRedirects
        self._api = huggingface_hub.HfApi(token=token or False)  # False: no token of huggingface_hub's own choosing
        self._guard = HubGuard(huggingface_hub.constants.ENDPOINT, config.read_timeout)
        self._guard.install(huggingface_hub.get_session())
        self._getter = HubGetter(huggingface_hub.constants.ENDPOINT, token, self._repo, config.read_timeout)
        super().__init__(self._getter.objects, self._read_of, lane=False)  # the Hub redirects to its CDN
        self.commit: str | None = None
        #: Whether the resolve URLs' server honours Range (the Hub's CDN does, olah not), once a large file has asked.
        self._takes_ranges: bool | None = None

    @classmethod
    def from_config(cls, uri: str, config: Config, kind: Kind) -> HfSource:
        return cls(HfLocation.parse(uri, kind), config, kind)

    def describe(self) -> dict[str, Any]:
        return {
            "uri": str(self.location),
            "endpoint": self._hub.constants.ENDPOINT,
            "repo_type": self.repo_type,
            "revision": self.revision,
            "commit": self.commit,
        }

    def list_files(self) -> Iterator[RemoteFile]:
        def resolve_and_list() -> list[Any]:
            with self._translated_errors():
                info = self._api.repo_info(self.location.repo_id, revision=self.revision, repo_type=self.repo_type)
                if not isinstance(info.sha, str) or not _COMMIT.fullmatch(info.sha):
                    raise FetchError(
                        f"{self._server}: the {self.repo_type} info names no commit (its sha is {info.sha!r})"
                    )
                self.commit = info.sha
                return self._entries()

        # Under the retry policy, the listing's requests and the downloads held together (throttling waited out).
        entries = retrying(
            "list", str(self.location), resolve_and_list, trust=HUB_TRUST, throttle=self._getter.throttle
        )
        with answers.read_from(self._hub.constants.ENDPOINT, f"listing {self.location}"):
            files = [_remote_file(entry, self.location.sub_path) for entry in entries]
        yield from files

    def part_size_for(self, file: RemoteFile) -> int | None:
        """PART_SIZE where the server honours Range, which the first large file probes; else None: whole files."""
        if comes_whole(file.size, PART_SIZE):
            return PART_SIZE  # it comes whole either way: no need to ask
        if self._takes_ranges is None:
            self._takes_ranges = self._getter.takes_ranges(self._url(file), self._uri_of(file))
            _log.info("range probe", path=file.path, ranges=self._takes_ranges)
        return PART_SIZE if self._takes_ranges else None

    def _entries(self) -> list[Any]:
        """Files of the repo at the resolved commit, or of the sub-path (a folder, or a single file)."""
        sub = self.location.sub_path
        tree = self._tree(sub, recursive=True)
        files = [e for e in tree if isinstance(e, self._hub.hf_api.RepoFile)]
        if files or not sub:
            return files
        parent, _, _ = sub.rpartition("/")
        single = [e for e in self._tree(parent, recursive=False) if e.path == sub]
        if not single or not isinstance(single[0], self._hub.hf_api.RepoFile):
            raise FetchError(
                f"{self.location}: path {sub!r} does not exist in {self.repo_type} {self.location.repo_id} "
                f"at {self.revision} ({self.commit})"
            )
        return single

    def _tree(self, path: str, recursive: bool) -> list[Any]:
        """The tree's entries; a FetchError when its pages go round in a loop (an entry comes again)."""
        what = f"hf://{self.location.repo_id}/{path}"
        entries: dict[str, Any] = {}  # by path
        try:
            with self._guard.listing(what):
                for entry in self._api.list_repo_tree(
                    self.location.repo_id,
                    path_in_repo=path or None,
                    recursive=recursive,
                    revision=self.commit,
                    repo_type=self.repo_type,
                ):
                    if entry.path in entries:
                        raise FetchError(
                            f"listing {what}: {self._server} lists {entry.path!r} again: its pages go round in a loop"
                        )
                    entries[entry.path] = entry
                    self._guard.progressed()
        except self._hub.errors.RemoteEntryNotFoundError:
            return []
        return list(entries.values())

    def _read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """The read of `file`'s bytes [offset, offset + length) at its resolve URL (the commit in it)."""
        return ObjectRead(self._url(file), None, offset, length, file.size, self._uri_of(file), "download")

    def _url(self, file: RemoteFile) -> str:
        return self._hub.hf_hub_url(self.location.repo_id, file.locator, repo_type=self.repo_type, revision=self.commit)

    @property
    def _repo(self) -> str:
        return f"{self.repo_type} {self.location.repo_id}"

    def _uri_of(self, file: RemoteFile) -> str:
        """The URI of a file, as messages name it."""
        return f"hf://{self.location.repo_id}/{file.path}"

    @contextlib.contextmanager
    def _translated_errors(self) -> Iterator[None]:
        """huggingface_hub's exceptions, turned into messages that say what to do."""
        errors = self._hub.errors
        repo = self._repo
        try:
            yield
        except errors.GatedRepoError:
            raise FetchError(gated(repo)) from None
        except errors.RepositoryNotFoundError:
            raise FetchError(not_found(repo)) from None
        except errors.RevisionNotFoundError:
            raise FetchError(f"{repo} has no revision {self.revision!r} (branch, tag or commit)") from None
        except errors.RemoteEntryNotFoundError as exc:
            raise FetchError(f"{repo}: a listed file is missing at the resolved commit: {exc}") from None
        except errors.DisabledRepoError:
            raise FetchError(f"{repo} has been disabled on the Hub") from None
        except errors.HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 401:
                raise FetchError(BAD_TOKEN) from None
            if status is not None and (
                transient := hub_transient(status, "from the Hub", exc.response.headers.get("retry-after"))
            ):
                raise transient from None
            raise FetchError(f"the Hub refused a request for {repo}: {exc}") from None
        except (errors.LocalEntryNotFoundError, self._transport_errors) as exc:
            if untrusted_certificate(exc):
                raise  # the retry policy words it, naming HUB_TRUST
            raise Retriable(f"{self._server} does not answer ({exc})") from None
        except self._too_many_redirects:
            raise FetchError(f"{self._server}: more than 20 redirects answering for {repo}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            # huggingface_hub read an answer of the wrong shape: not JSON, a list for an object, a field missing
            raise FetchError(
                f"{self._server}: an answer about {repo} is not what the Hub's API sends "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from None

    @property
    def _server(self) -> str:
        """The server, as messages name it."""
        return f"the Hub at {self._hub.constants.ENDPOINT}"


#: huggingface_hub's older name for HF_TOKEN, which it still reads after HF_TOKEN.
OLDER_TOKEN_VARIABLE = "HUGGING_FACE_HUB_TOKEN"


def _saved_token(hub: Any) -> str | None:
    """With ACCESS_TOKEN and HF_TOKEN unset, the token huggingface_hub finds itself, as `hf download` would use it:
    HUGGING_FACE_HUB_TOKEN, else the one `hf auth login` saved (at HF_TOKEN_PATH, else under HF_HOME); its source
    logged, the token never shown, hidden wherever it may appear. None if there is none or its file is unreadable."""
    try:
        token = hub.get_token()
    except OSError as exc:
        _log.info("no saved token", reason=f"{hub.constants.HF_TOKEN_PATH}: {exc.strerror or exc}")
        return None
    if token:
        logs.hide(token)
        oidc = bool(os.environ.get("HF_OIDC_RESOURCE"))  # huggingface_hub's first way, when asked for
        older = bool(os.environ.get(OLDER_TOKEN_VARIABLE, "").strip())  # its second, before the file
        file = f"huggingface_hub's token file {hub.constants.HF_TOKEN_PATH}"
        oidc_exchange = "huggingface_hub's OIDC exchange (HF_OIDC_RESOURCE)"
        _log.info("hub token", source=oidc_exchange if oidc else OLDER_TOKEN_VARIABLE if older else file)
    return token or None


#: A git commit id, as the Hub names commits (sha1; sha256 repositories have longer ones).
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DIGEST = {"sha256": re.compile(r"[0-9a-f]{64}"), GIT_SHA1: re.compile(r"[0-9a-f]{40}")}


def _remote_file(entry: Any, sub_path: str) -> RemoteFile:
    """A tree entry of the sub-path asked for (the whole repo: ""), with the digest the Hub vouches for: sha256 for
    LFS files, the git blob id otherwise; Malformed when its path, size or digest is not what the Hub sends."""
    algorithm, digest = ("sha256", entry.lfs.sha256) if entry.lfs is not None else (GIT_SHA1, entry.blob_id)
    path = answers.text(entry.path, "the path of a tree entry")
    if sub_path and path != sub_path:  # the sub-path itself when it names one file
        answers.under(f"{sub_path}/", path)
    size = answers.size(entry.size, f"the size of {path!r}")
    if not isinstance(digest, str) or not _DIGEST[algorithm].fullmatch(digest):
        raise answers.Malformed(f"the tree entry of {path!r} carries no {algorithm} digest (it has {digest!r})")
    checksum = Checksum(algorithm, digest)
    return RemoteFile(path, size, checksum.hexdigest, path, checksum)
