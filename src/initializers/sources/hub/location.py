"""Where in the Hub `STORAGE_URI` points, read by huggingface_hub's own parser (`parse_hf_uri`): Kubeflow's
`hf://OWNER/NAME`, huggingface_hub's `hf://[datasets/|models/]OWNER/NAME[@REVISION][/PATH]`, and a Hub page's address
pasted from a browser (`https://huggingface.co/datasets/OWNER/NAME/tree/v1.0`). `hf://OWNER/NAME` keeps Kubeflow's
meaning: a repository of the program's kind. A type the URI states (a prefix, or a page's address, where a model's has
none) must be the program's: the other program is named otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import masked
from initializers.config.contract import Kind
from initializers.sources.hub.library import huggingface_hub

_EXPECTED = "expected hf://OWNER/NAME[@REVISION][/PATH]"
#: What each program fetches, by the type huggingface_hub names.
_PROGRAMS = {"dataset": "dataset-initializer", "model": "model-initializer"}


@dataclass(frozen=True)
class HfLocation:
    """A repository of the program's kind, a revision if one is named, and a path in it ("" for the whole repo)."""

    repo_id: str
    revision: str | None
    sub_path: str

    @classmethod
    def parse(cls, uri: str, kind: Kind) -> HfLocation:
        """The location `uri` names for the `kind` program; a ConfigError naming STORAGE_URI and the form to use."""
        hub = huggingface_hub()
        scheme, sep, rest = uri.partition("://")
        given = f"hf://{rest}" if sep and scheme.lower() == "hf" else uri  # the scheme in any case, as for s3://
        try:
            parsed = hub.parse_hf_uri(given, endpoint=hub.constants.ENDPOINT)
        except hub.errors.HfUriError as exc:
            raise ConfigError(
                f"STORAGE_URI: {masked(uri)!r} is not a Hub repository: {exc.msg.strip()} ({_EXPECTED})"
            ) from None
        stated = not given.startswith("hf://") or parsed.type != "model" or rest.startswith("models/")
        repo_type = parsed.type if stated else kind.name
        if repo_type not in _PROGRAMS:
            raise ConfigError(
                f"STORAGE_URI: {masked(uri)!r} names a {repo_type} on the Hub; the {kind.program} fetches "
                f"{kind.name} repositories ({_EXPECTED})"
            )
        if repo_type != kind.name:
            raise ConfigError(
                f"STORAGE_URI: {masked(uri)!r} names a {repo_type} repository: the {_PROGRAMS[repo_type]} fetches "
                f"it; the {kind.program} fetches {kind.name} repositories"
            )
        segments = parsed.path_in_repo.split("/") if parsed.path_in_repo else []
        if any(segment in (".", "..") for segment in segments):
            raise ConfigError(f"STORAGE_URI: {masked(uri)!r} has a '.' or '..' segment in its path ({_EXPECTED})")
        return cls(parsed.id, parsed.revision, parsed.path_in_repo.rstrip("/"))

    @property
    def place(self) -> str:
        """What is fetched, whatever its version: the repository and the path in it."""
        return f"hf://{self.repo_id}" + (f"/{self.sub_path}" if self.sub_path else "")

    def __str__(self) -> str:
        """Kubeflow's form, which the program's kind completes: `hf://OWNER/NAME[@REVISION][/PATH]`."""
        revision = f"@{quote(self.revision, safe='')}" if self.revision else ""
        return f"hf://{self.repo_id}{revision}" + (f"/{self.sub_path}" if self.sub_path else "")


def is_hub_page(uri: str) -> bool:
    """The address of a page on a Hub's host (huggingface.co, hf.co, or HF_ENDPOINT's host and port: another port of
    that host is another server, a web server's), with or without http(s)://."""
    constants = huggingface_hub().constants
    parts = urlsplit(uri if "://" in uri else f"//{uri}")
    endpoint = urlsplit(constants.ENDPOINT)
    on_endpoint = parts.netloc.rpartition("@")[2].lower() == endpoint.netloc.lower()  # its host and its port
    hub_host = parts.hostname in constants.HF_URL_HOSTS - {endpoint.hostname}  # which holds HF_ENDPOINT's host
    return parts.scheme.lower() in ("http", "https", "") and (hub_host or on_endpoint)
