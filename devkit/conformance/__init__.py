"""One fixture object per store, behind one interface, for the conformance suite (`tests/test_conformance.py`).

As rclone's fstests drives every backend through `fs.Fs`, the suite drives every store through a `Store`: put files,
change one, point a program at the store through a relay (`devkit.relay`) that counts what passes and injects faults,
and read back what landed. Which cases apply to a store is what its source's class declares (`store.contract`: a
Storage reads ranges, a Maker makes its files, `pins_versions`, `checksum_kinds`), and what its server allows
(`relayed`, `selection`). Each store's fixtures are a module of this package named by its scheme (`s3.py`, `hf.py`
...), found by `fixtures`: a new store is one module here, its `FIXTURES`.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from xml.sax.saxutils import escape

import pytest

from devkit.malformed import MalformedAnswer
from devkit.relay import CorruptFault, EchoFault, Relay, StatusFault
from initializers.store.contract import Maker, Source, Storage


def fixtures(scheme: str) -> dict[str, type[Store]]:
    """The conformance stores of `scheme`'s store, by the suite's id for each (its scheme, and a variant's own: a
    store that reads the same scheme another way): `FIXTURES` of this package's module named by the scheme; none
    when there is no such module."""
    name = f"{__name__}.{scheme}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name != name:
            raise
        return {}
    return dict(module.FIXTURES)


class Store(ABC):
    """A source's real server, seeded by the test, reached by the program through a relay."""

    #: The registered scheme this store serves, and the class of the source that reads it.
    scheme: ClassVar[str]
    source: ClassVar[type[Source]]
    #: The program run against it: the dataset program takes every scheme but a model-only one, and fetches every
    #: file by default (the model program's default selection would pick among them).
    kind: ClassVar[str] = "dataset"
    #: The program reaches the server through a relay (`relay_for`), so faults can be injected and bytes counted.
    relayed: ClassVar[bool] = True
    #: Its URI names a folder it lists; False: one file (a web server's URL), landing under its own name, so a case
    #: puts only the file it is about (the suite's `held`).
    lists: ClassVar[bool] = True
    #: IGNORE_PATTERNS / ALLOW_PATTERNS select files (else they are refused, exit 2).
    selection: ClassVar[bool] = True
    #: It holds objects named like a folder (`d/`, `put_folder_named`): a bucket's or a container's, not a Hub repo's
    #: git tree.
    folder_names: ClassVar[bool] = False
    #: Its credentials are exchanged for a token at an endpoint the relay answers (`TOKEN_PATH`, by `token_fault`).
    token_endpoint: ClassVar[bool] = False
    #: What the store does otherwise than a case asks, found by the suite: case -> the finding, and where the
    #: documentation says otherwise. The case runs and is expected to fail (strictly: once the source is fixed, the
    #: entry must go).
    findings: ClassVar[dict[str, str]] = {}

    @classmethod
    @abstractmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        """The store on its server (the suite's fixtures, from `request`) behind its relays, for one case."""

    @property
    def ranged(self) -> bool:
        """Large files are fetched in ranges by the engine (8 MiB each): the source is a Storage."""
        return issubclass(self.source, Storage)

    @property
    def makes_files(self) -> bool:
        """The source makes its files (shards) itself, from what it reads, rather than copying files: a Maker."""
        return issubclass(self.source, Maker)

    @property
    def pinned_versions(self) -> bool:
        """A run reads one version of the source, whatever changes meanwhile (a Hub commit, a table's snapshot)."""
        return self.source.pins_versions

    @property
    def verifies_content(self) -> bool:
        """The bytes of a file are checked against a checksum the source vouches for (else by size only)."""
        return bool(self.source.checksum_kinds)

    def put(self, files: dict[str, bytes]) -> None:
        """Make the source hold exactly `files` (path relative to the source's root -> bytes): each put as a change,
        unless the store has a way to put them at once."""
        for path, data in files.items():
            self.change(path, data)

    @abstractmethod
    def change(self, path: str, data: bytes) -> None:
        """A new version of one file."""

    def put_folder_named(self, path: str, data: bytes) -> None:
        """An object named like a folder (`path` ends in `/`), where `folder_names` says the store holds one."""
        self.change(path, data)

    @abstractmethod
    def env(self, output: Path) -> dict[str, str]:
        """The program's environment to fetch the source into `output`, through the relay."""

    @abstractmethod
    def relay_for(self, path: str) -> tuple[Relay, str]:
        """The relay that carries `path`'s bytes, and a substring of the requests for them (to aim a fault)."""

    @abstractmethod
    def listing(self) -> tuple[Relay, str]:
        """The relay that carries the listing, and a substring of the request for its first page (to aim a fault)."""

    @property
    @abstractmethod
    def relays(self) -> list[Relay]:
        """Every relay in front of the store's servers (to reset or slow them all)."""

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """A transient server error (500) on the requests `match` and `method` name."""
        return StatusFault(status=500, times=times, match=match, method=method)

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """A throttled answer (503 SlowDown) asking to come back in 0.3 s, to the requests `match` and `method` name."""
        return StatusFault(status=503, times=times, match=match, method=method, headers={"Retry-After": "0.3"})

    def flip_fault(self, match: str) -> CorruptFault:
        """The first byte of one answer carrying the file's bytes inverted."""
        return CorruptFault(match=match, times=1)

    def landed(self, output: Path) -> dict[str, bytes]:
        """What the run delivered, as path -> bytes: the files under `output` (the state folder excepted)."""
        return {
            p.relative_to(output).as_posix(): p.read_bytes()
            for p in sorted(output.rglob("*"))
            if p.is_file() and not p.relative_to(output).as_posix().startswith(".initializer/")
        }

    def reset(self) -> None:
        """Forget the relays' counts and faults, and let bodies through at full speed."""
        for relay in self.relays:
            relay.reset()
            relay.clear_faults()
            relay.bytes_per_second = None
            relay.slow_paths = None

    def body_bytes(self) -> int:
        return sum(relay.traffic.body_bytes for relay in self.relays)

    def echo_fault(self, status: int, match: str | None) -> EchoFault:
        """An error of `status`, in the store's own format, quoting back each request `match` names (None: every
        one), credentials and all, in each of its fields (a code too): what a careless or hostile server or proxy
        does. S3's XML error here."""
        return EchoFault(status=status, match=match, times=None, render=xml_error)

    @abstractmethod
    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """The store's environment with credentials that travel on the wire (in `keys`: the files they need), and the
        secrets it holds."""

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The answers no store's documentation promises (`devkit.malformed`) this store's can carry, by case; none
        here (the cache's listing is a table's metadata and manifests, read by pyiceberg in ranges, which a 200 in
        the server's place cannot answer)."""
        return {}

    def token_fault(self) -> StatusFault | None:
        """The relay's answer to the token endpoint, which `token_endpoint` says the store asks (None: it asks
        none)."""
        return None


def manifest_entries(output: Path) -> list[dict[str, Any]]:
    return json.loads((output / ".initializer" / "manifest.json").read_text())["files"]


def xml_error(text: str) -> bytes:
    """S3's and Azure's error body, the echo as its Code and its Message."""
    said = escape(text)
    return f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{said}</Code><Message>{said}</Message></Error>'.encode()


#: The bearer token the relay's token endpoint issues to a store's credentials (`credentialed_env`).
ISSUED_TOKEN = "ya29.c.EchoedBearer7Qx2Lm9Zp4Rt8Vw3Kd6Hs1Jf5Gb0"
#: What a store's token endpoint is asked at, behind its relay (`credentialed_env`): Google's, for a service account.
TOKEN_PATH = "/token"
