"""One fixture object per source, behind one interface, for the conformance suite (`tests/test_conformance.py`).

As rclone's fstests drives every backend through `fs.Fs`, the suite drives every registered source through a
`Store`: put files, change one, point a program at the store through a relay (`devkit.relay`) that counts what
passes and injects faults, and read back what landed. Which cases apply to a store is what its source's class
declares (`store.contract`: a Storage reads ranges, a Maker makes its files, `pins_versions`, `checksum_kinds`), and
what its server allows (`relayed`, `selection`); a new source is one class here and one entry in `STORES`.

The cache source makes its files from an Iceberg table, so its "files" are rows `(path, data)`, one data file per
`put` file, and what landed is read back from the shards' rows.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, unquote, urlencode
from xml.sax.saxutils import escape

from devkit.azurite import ACCOUNT as AZURE_ACCOUNT
from devkit.azurite import Azurite, account_sas, connection_string
from devkit.fake_gcs import FakeGCS
from devkit.hubserver import ALL_REPOS, HubServer
from devkit.relay import CorruptFault, EchoFault, Relay, StatusFault
from devkit.seaweed import SeaweedFS
from initializers.sources.azure.source import AzureSource
from initializers.sources.gcs.source import GcsSource
from initializers.sources.hub.source import HfSource
from initializers.sources.iceberg.source import IcebergSource
from initializers.sources.s3.source import S3Source
from initializers.store.contract import Maker, Source, Storage

#: The Hub's error body, as the Hub answers (JSON); S3's is the relay's default XML.
_HUB_ERROR = b'{"error": "conformance fault"}'
#: Cloud Storage's JSON error, its reason to fill in.
_GCS_ERROR = b'{"error": {"code": 0, "message": "conformance fault", "errors": [{"reason": "%s"}]}}'


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
    #: IGNORE_PATTERNS / ALLOW_PATTERNS select files (else they are refused, exit 2).
    selection: ClassVar[bool] = True
    #: It holds objects named like a folder (`d/`, `put_folder_named`): a bucket's or a container's, not a Hub repo's
    #: git tree.
    folder_names: ClassVar[bool] = False

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

    @abstractmethod
    def put(self, files: dict[str, bytes]) -> None:
        """Make the source hold exactly `files` (path relative to the source's root -> bytes)."""

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


class S3Store(Store):
    """A bucket on SeaweedFS; a relay in front of it."""

    scheme = "s3"
    source = S3Source
    folder_names = True

    def __init__(self, seaweed: SeaweedFS, s3: Any, bucket: str, relay: Relay) -> None:
        self.seaweed, self.s3, self.bucket, self.relay = seaweed, s3, bucket, relay
        self.prefix = "root"

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            self.change(path, data)

    def change(self, path: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{path}", Body=data)

    def put_folder_named(self, path: str, data: bytes) -> None:
        """Listed and served by the relay: SeaweedFS makes a folder of a key ending in `/`, its bytes dropped."""
        self.relay.injected.setdefault(self.bucket, {})[f"{self.prefix}/{path}"] = data

    def env(self, output: Path) -> dict[str, str]:
        return {**self.seaweed.env(), "ENDPOINT": self.relay.endpoint,
                "STORAGE_URI": f"s3://{self.bucket}/{self.prefix}", "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{self.bucket}/{self.prefix}/{quote(path, safe='/~')}"

    def listing(self) -> tuple[Relay, str]:
        return self.relay, "list-type=2"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]


class HubStore(Store):
    """A dataset repo on our Hub server; relays in front of its API origin and its CDN (where LFS files come from)."""

    scheme = "hf"
    source = HfSource
    repo = "org/conformance"

    def __init__(self, hub: HubServer, api: Relay, cdn: Relay) -> None:
        self.hub, self.api, self.cdn = hub, api, cdn
        hub.cdn_public_endpoint = cdn.endpoint
        self._made = False

    def put(self, files: dict[str, bytes]) -> None:
        if self._made:
            self.hub.commit(self.repo, dict(files), repo_type="dataset")
        else:
            self.hub.add_repo(self.repo, files, repo_type="dataset")
            self._made = True

    def change(self, path: str, data: bytes) -> None:
        self.hub.commit(self.repo, {path: data}, repo_type="dataset")

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_URI": f"hf://datasets/{self.repo}", "HF_ENDPOINT": self.api.endpoint,
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        """LFS files (the suite's `.bin` files) come from the CDN, named in its query; the others from `resolve`."""
        if path.endswith(".bin"):
            return self.cdn, urlencode({"file": path})
        return self.api, f"/resolve/main/{quote(path)}"

    def listing(self) -> tuple[Relay, str]:
        """The repo's tree (its revision is resolved before, as the source opens)."""
        return self.api, "/tree/"

    @property
    def relays(self) -> list[Relay]:
        return [self.api, self.cdn]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """The Hub's 500, a JSON error."""
        return StatusFault(
            status=500, times=times, match=match, method=method, body=_HUB_ERROR, content_type="application/json"
        )

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """The Hub's rate limit: 429 with Retry-After."""
        return StatusFault(status=429, times=times, match=match, method=method, headers={"Retry-After": "0.3"},
                           body=_HUB_ERROR, content_type="application/json")  # fmt: skip


class GcsStore(Store):
    """A bucket on fake-gcs-server (Google's JSON API); a relay in front of it, which STORAGE_EMULATOR_HOST names."""

    scheme = "gs"
    source = GcsSource
    folder_names = True
    prefix = "root"

    def __init__(self, gcs: FakeGCS, bucket: str, relay: Relay) -> None:
        self.gcs, self.bucket, self.relay = gcs, bucket, relay
        gcs.create_bucket(bucket)

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            self.change(path, data)

    def change(self, path: str, data: bytes) -> None:
        self.gcs.put_object(self.bucket, f"{self.prefix}/{path}", data)

    def put_folder_named(self, path: str, data: bytes) -> None:
        """Listed by the relay in the server's place, the server's own listing with the object added: fake-gcs-server
        keeps objects as files, so a name ending in `/` is a folder there. Its checksum is never read: an empty one
        is skipped, one with bytes refused."""
        listing = self.gcs.listing(self.bucket, f"{self.prefix}/")
        item = {"name": f"{self.prefix}/{path}", "size": str(len(data)), "generation": "1", "crc32c": "AAAAAA=="}
        listing.setdefault("items", []).append(item)
        body = json.dumps(listing).encode()
        _, match = self.listing()
        json_type = "application/json"
        self.relay.add_fault(StatusFault(status=200, times=None, match=match, body=body, content_type=json_type))

    def env(self, output: Path) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.relay.endpoint, "STORAGE_URI": f"gs://{self.bucket}/{self.prefix}",
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        """An object's bytes come from its media URL: its whole name, escaped, then `?alt=media`."""
        return self.relay, f"/o/{quote(f'{self.prefix}/{path}', safe='')}?alt=media"

    def listing(self) -> tuple[Relay, str]:
        """The bucket's objects: `/o` with a query, where an object's own requests name it (`/o/<name>`)."""
        return self.relay, f"/b/{self.bucket}/o?"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """Cloud Storage's 500, a JSON error."""
        return StatusFault(status=500, times=times, match=match, method=method, body=_GCS_ERROR % b"backendError",
                           content_type="application/json")  # fmt: skip

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """Cloud Storage's rate limit: 429 rateLimitExceeded, with Retry-After."""
        return StatusFault(status=429, times=times, match=match, method=method, headers={"Retry-After": "0.3"},
                           body=_GCS_ERROR % b"rateLimitExceeded", content_type="application/json")  # fmt: skip


class CacheStore(Store):
    """An Iceberg table on SeaweedFS whose rows are `(path, data)`, one data file per file put; the program reads it
    through a relay in front of SeaweedFS and writes it as Parquet shards, read back as rows."""

    scheme = "cache"
    source = IcebergSource
    selection = False  # every row is sharded
    nodes = 2

    def __init__(self, seaweed: SeaweedFS, bucket: str, relay: Relay, root: Path) -> None:
        from devkit.iceberg import sql_catalog

        self.seaweed, self.bucket, self.relay = seaweed, bucket, relay
        self.catalog = sql_catalog(root, f"s3://{bucket}/warehouse", seaweed)
        self.table: Any = None
        self.data_files: dict[str, str] = {}  # path -> the key of the data file holding its row

    def _rows(self, files: dict[str, bytes]) -> Any:
        import pyarrow as pa

        schema = pa.schema([pa.field("path", pa.string()), pa.field("data", pa.binary())])
        return pa.table({"path": list(files), "data": list(files.values())}, schema=schema)

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            if self.table is None:
                self.table = self.catalog.create_table("shop.files", self._rows({}).schema)
            self._append(path, data)

    def _append(self, path: str, data: bytes) -> None:
        before = self._data_file_paths()
        self.table.append(self._rows({path: data}))
        (added,) = self._data_file_paths() - before
        self.data_files[path] = added.split("://", 1)[1].split("/", 1)[1]  # the key in the bucket

    def _data_file_paths(self) -> set[str]:
        return {task.file.file_path for task in self.table.scan().plan_files()}

    def change(self, path: str, data: bytes) -> None:
        from pyiceberg.expressions import EqualTo

        self.table.delete(EqualTo("path", path))
        self._append(path, data)

    def env(self, output: Path) -> dict[str, str]:
        return {**self.seaweed.env(), "ENDPOINT": self.relay.endpoint, "STORAGE_URI": "cache://shop/files",
                "METADATA_LOC": self.table.metadata_location, "NUM_DATA_NODES": str(self.nodes),
                "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{self.bucket}/{self.data_files[path]}"

    def listing(self) -> tuple[Relay, str]:
        """The table's metadata file (METADATA_LOC), the first thing its listing reads."""
        return self.relay, ".metadata.json"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def flip_fault(self, match: str) -> CorruptFault:
        """Aimed at the read from the data file's first byte: pyarrow reads the footer first (a flip there falls in
        bytes it then reads again), then the whole file from its start, which a part copies byte for byte."""
        return CorruptFault(match=match, times=1, range_from=0)

    def landed(self, output: Path) -> dict[str, bytes]:
        """The rows of every shard, as path -> data; a path in two rows is a failure of the suite's, not a dict's."""
        import pyarrow.parquet as pq

        found: dict[str, bytes] = {}
        for part in sorted(output.glob("shard-*/*.parquet")):
            for row in pq.read_table(part).to_pylist():
                assert row["path"] not in found, f"{row['path']!r} is in two rows"
                found[row["path"]] = row["data"]
        return found


def manifest_entries(output: Path) -> list[dict[str, Any]]:
    return json.loads((output / ".initializer" / "manifest.json").read_text())["files"]


@contextlib.contextmanager
def hub_store() -> Iterator[HubStore]:
    with HubServer() as hub, Relay(hub.endpoint) as api, Relay(hub.cdn_endpoint) as cdn:
        yield HubStore(hub, api, cdn)


class AzureStore(Store):
    """A container on Azurite (SharedKey enforced); a relay in front of it, which the connection string's BlobEndpoint
    names. Blobs are put in one request each, so Azure records their Content-MD5."""

    scheme = "az"
    source = AzureSource
    folder_names = True
    prefix = "root"

    def __init__(self, azurite: Azurite, container: str, relay: Relay) -> None:
        self.azurite, self.container, self.relay = azurite, container, relay
        azurite.create_container(container)

    def put(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            self.change(path, data)

    def change(self, path: str, data: bytes) -> None:
        self.azurite.put_blob(self.container, f"{self.prefix}/{path}", data)

    def env(self, output: Path) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{self.relay.endpoint}/{AZURE_ACCOUNT}"),
                "STORAGE_URI": f"az://{self.container}/{self.prefix}", "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{AZURE_ACCOUNT}/{self.container}/{quote(f'{self.prefix}/{path}', safe='/~')}"

    def listing(self) -> tuple[Relay, str]:
        return self.relay, "comp=list"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """Azure's 500 InternalError."""
        return _azure_fault(500, "InternalError", match, times, method)

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """Azure's throttling: 503 ServerBusy, asking to come back in 0.3 s."""
        return _azure_fault(503, "ServerBusy", match, times, method, {"Retry-After": "0.3"})


class AzureBlocksStore(AzureStore):
    """The same, its blobs staged in blocks and committed from their list, as large uploads are: Azure records no
    Content-MD5 for them, so each answer is checked against the MD5 Azure sends of it instead."""

    def change(self, path: str, data: bytes) -> None:
        blocks = [data[start : start + _BLOCK] for start in range(0, len(data), _BLOCK)] or [b""]
        self.azurite.put_blocks(self.container, f"{self.prefix}/{path}", blocks)

    @property
    def verifies_content(self) -> bool:
        """No: their manifest entries record their size and ETag (their bytes were checked on the way only)."""
        return False


#: The size of the blocks `AzureBlocksStore` stages a blob in.
_BLOCK = 3 << 20


def _azure_fault(
    status: int, code: str, match: str, times: int, method: str | None, headers: dict[str, str] | None = None
) -> StatusFault:
    """Azure's error answer: its code in x-ms-error-code and in the XML body."""
    body = (
        f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>conformance fault</Message></Error>'
    )
    return StatusFault(status=status, times=times, match=match, method=method, body=body.encode(),
                       headers={"x-ms-error-code": code, **(headers or {})})  # fmt: skip


# --- a server that quotes every request back in its errors ------------------------------------------------------


def _xml_error(text: str) -> bytes:
    """S3's and Azure's error body, the echo as its Code and its Message."""
    said = escape(text)
    return f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{said}</Code><Message>{said}</Message></Error>'.encode()


def _gcs_error(status: int) -> Callable[[str], bytes]:
    """Cloud Storage's JSON error, the echo as its message and its reason."""
    return lambda text: json.dumps(
        {"error": {"code": status, "message": text, "errors": [{"reason": text, "message": text}]}}
    ).encode()


def echo_fault(store: Store, status: int, match: str | None) -> EchoFault:
    """An error of `status`, in the store's own format, quoting back each request `match` names (None: every one),
    credentials and all, in each of its fields (a code too): what a careless or hostile server or proxy does."""
    if store.scheme in ("s3", "cache"):
        return EchoFault(status=status, match=match, times=None, render=_xml_error)
    if store.scheme == "az":
        return EchoFault(status=status, match=match, times=None, render=_xml_error, echo_header="x-ms-error-code")
    if store.scheme == "gs":
        return EchoFault(status=status, match=match, times=None, render=_gcs_error(status),
                         content_type="application/json")  # fmt: skip
    return EchoFault(status=status, match=match, times=None, content_type="application/json",
                     render=lambda text: json.dumps({"error": text}).encode(), echo_header="X-Error-Code")  # fmt: skip


#: The bearer token the relay's token endpoint issues to a store's credentials (`credentialed_env`).
ISSUED_TOKEN = "ya29.c.EchoedBearer7Qx2Lm9Zp4Rt8Vw3Kd6Hs1Jf5Gb0"
#: What a store's token endpoint is asked at, behind its relay (`credentialed_env`): Google's, for a service account.
TOKEN_PATH = "/token"
_HUB_TOKEN = "hf_EchoedHubToken4Kx9Pq2Wz7Lm3Rt8"


def credentialed_env(store: Store, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
    """The store's environment with credentials that travel on the wire (in `keys`: the files they need), and the
    secrets it holds: the Hub's token; for Cloud Storage, a service-account key whose token endpoint is the relay's
    `TOKEN_PATH` (google-auth sends it a signed assertion, then the token on every request); for Azure, a SAS in the
    query of every request; for S3 and the cache, the secret key (its signatures are not secrets)."""
    env = store.env(output)
    if isinstance(store, HubStore):
        store.hub.tokens[_HUB_TOKEN] = {ALL_REPOS}
        return {**env, "ACCESS_TOKEN": _HUB_TOKEN}, [_HUB_TOKEN]
    if isinstance(store, GcsStore):
        key, pem = _service_account_key(store.relay.endpoint + TOKEN_PATH)
        path = keys / "key.json"
        path.write_text(json.dumps(key))
        del env["STORAGE_EMULATOR_HOST"]
        return {**env, "GCS_ENDPOINT": store.relay.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(path)}, [
            pem, *pem.splitlines()[1:-1], ISSUED_TOKEN]  # fmt: skip
    if isinstance(store, AzureStore):
        sas = account_sas()
        return {**env, "AZURE_STORAGE_CONNECTION_STRING": connection_string(
            f"{store.relay.endpoint}/{AZURE_ACCOUNT}", key=None), "AZURE_STORAGE_SAS_TOKEN": sas}, [
            unquote(sas.rpartition("sig=")[2])]  # fmt: skip
    return env, [env["SECRET_ACCESS_KEY"]]


def token_endpoint(store: Store) -> StatusFault:
    """The relay answering its `TOKEN_PATH` as Google's token endpoint does, with `ISSUED_TOKEN`."""
    answer = json.dumps({"access_token": ISSUED_TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
    return StatusFault(status=200, match=TOKEN_PATH, times=None, body=answer, content_type="application/json")


def _service_account_key(token_uri: str) -> tuple[dict[str, str], str]:
    """A service-account key with a fresh RSA key, its token endpoint at `token_uri`; and its private key (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    text = pem.decode()
    key_file = {"type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": text,
                "client_email": "r@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}  # fmt: skip
    return key_file, text
