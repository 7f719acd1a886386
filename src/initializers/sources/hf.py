"""The HuggingFace Hub source: huggingface_hub's own client resolves and lists; `hf_get` fetches the bytes.

The revision is resolved to one commit up front, so every file comes from the same commit. The tree listing
gives each file's size and digest (sha256 for LFS files, the git blob id otherwise); each file is then
fetched from its resolve URL, in parallel ranges when the server honours Range, else in one GET, and the
engine checks the digest before the file takes its final name (huggingface_hub itself only checks sizes).
`HF_HOME` points under `.initializer/`, so nothing needs a writable HOME.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from initializers.checksums import GIT_SHA1, Checksum
from initializers.contract import Config, Kind
from initializers.errors import FetchError
from initializers.plan import RemoteFile
from initializers.retry import Retriable, retrying
from initializers.sources.base import PART_SIZE, Sink, Storage
from initializers.sources.hf_get import BAD_TOKEN, HubGetter, gated, not_found
from initializers.sources.http_get import RETRIABLE_STATUS, retriable
from initializers.uris import HfLocation

_T = TypeVar("_T")


class HfSource(Storage):
    part_size = None  # PART_SIZE once a probe shows the server honours Range (the Hub's CDN does, olah does not)

    def __init__(self, location: HfLocation, config: Config, kind: Kind, staging: str) -> None:
        self.location = location
        self.repo_type = kind.name  # "dataset" or "model": the program decides what the repo is
        self.revision = location.revision or config.revision or "main"
        self._token: str | bool = config.access_token or False  # False: never a token stored on this machine
        # Read by huggingface_hub at import time; users' own values win.
        os.environ.setdefault("HF_HOME", os.path.join(staging, "home"))
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        import httpx2  # huggingface_hub's HTTP client: its transport errors are the network failures
        import huggingface_hub  # deferred: its import reads the variables above

        self._hub = huggingface_hub
        self._transport_errors = httpx2.TransportError
        self._api = huggingface_hub.HfApi(token=self._token)
        self._getter = HubGetter(
            huggingface_hub.constants.ENDPOINT, config.access_token, self._repo, config.read_timeout
        )
        self.commit: str | None = None

    @classmethod
    def from_config(cls, uri: str, config: Config, kind: Kind, staging: str) -> HfSource:
        return cls(HfLocation.parse(uri), config, kind, staging)

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
            self.commit = self._api.repo_info(
                self.location.repo_id, revision=self.revision, repo_type=self.repo_type
            ).sha
            return self._entries()

        files = [_remote_file(entry) for entry in self._retrying(f"listing {self.location}", resolve_and_list)]
        large = next((file for file in files if file.size > 2 * PART_SIZE), None)
        if large is not None and self._getter.takes_ranges(self._url(large), self._uri_of(large)):
            self.part_size = PART_SIZE
        yield from files

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
        try:
            return list(
                self._api.list_repo_tree(
                    self.location.repo_id,
                    path_in_repo=path or None,
                    recursive=recursive,
                    revision=self.commit,
                    repo_type=self.repo_type,
                )
            )
        except self._hub.errors.RemoteEntryNotFoundError:
            return []

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        self._getter.get(self._url(file), file.size, offset, length, self._uri_of(file), sink)

    def _url(self, file: RemoteFile) -> str:
        return self._hub.hf_hub_url(self.location.repo_id, file.locator, repo_type=self.repo_type, revision=self.commit)

    def interrupt(self) -> None:
        self._getter.interrupt()

    def close(self) -> None:
        self._getter.close()

    @property
    def _repo(self) -> str:
        return f"{self.repo_type} {self.location.repo_id}"

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        """`call` with huggingface_hub's errors translated, under the retry policy (throttling waited out)."""

        def translated() -> _T:
            with self._translated_errors():
                return call()

        return retrying("list", what, translated)

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
            if status is not None and (status >= 500 or status in RETRIABLE_STATUS):
                raise retriable(status, "from the Hub", exc.response.headers.get("retry-after")) from None
            raise FetchError(f"the Hub refused a request for {repo}: {exc}") from None
        except (errors.LocalEntryNotFoundError, self._transport_errors) as exc:
            raise Retriable(f"cannot reach the Hub at {self._hub.constants.ENDPOINT}: {exc}") from None


def _remote_file(entry: Any) -> RemoteFile:
    """A tree entry, with the digest the Hub vouches for: sha256 for LFS files, the git blob id otherwise."""
    checksum = Checksum("sha256", entry.lfs.sha256) if entry.lfs is not None else Checksum(GIT_SHA1, entry.blob_id)
    return RemoteFile(entry.path, entry.size, checksum.hexdigest, entry.path, checksum)
