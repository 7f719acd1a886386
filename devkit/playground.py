"""The demo's servers on loopback, seeded: `make demo` fetches from them, `make serve` keeps them up for a user, and
tests/test_doc_snippets.py runs the documentation's snippets against them.

S3 (SeaweedFS, its keys enforced): bucket `models` with all-MiniLM-L6-v2/, bucket `datasets` with tiny-corpus/ and
an Iceberg warehouse holding the table shop.reviews. The Hub: the same model and corpus, and a private model repo
that only PRIVATE_TOKEN may read. Google Cloud Storage (fake-gcs-server, Google's emulator) and Azure Blob Storage
(Azurite, Microsoft's): the model and the corpus again, in buckets and containers `models` and `datasets`.
"""

from __future__ import annotations

import errno
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import astuple, dataclass
from pathlib import Path

from devkit.azurite import Azurite
from devkit.fake_gcs import FakeGCS
from devkit.hubserver import HubServer
from devkit.ports import is_free
from devkit.samples import CORPUS_REPO, MINILM_REPO, minilm_files, tiny_corpus
from devkit.seaweed import SeaweedFS


@dataclass(frozen=True)
class Ports:
    s3: int
    hub: int
    hub_cdn: int  # where the Hub redirects LFS downloads, as huggingface.co redirects them to its CDN
    gcs: int
    azure: int

    @classmethod
    def from_base(cls, base: int) -> Ports:
        """S3 on `base`, the Hub on the next port, its CDN on the one after, then Cloud Storage's and Azure's
        emulators."""
        return cls(s3=base, hub=base + 1, hub_cdn=base + 2, gcs=base + 3, azure=base + 4)


#: `make serve`'s ports, which the documentation's snippets name.
DOCUMENTED_PORTS = Ports.from_base(8333)
TABLE_URI = "cache://shop/reviews"
PRIVATE_REPO = "initializers/private-model"
PRIVATE_TOKEN = "hf_playground"


class PortsInUse(Exception):
    """Something else listens on `ports`, of the playground's `needed`."""

    def __init__(self, ports: list[int], needed: Ports) -> None:
        super().__init__(", ".join(map(str, ports)))
        self.ports, self.needed = ports, needed


class HeldPorts:
    """The playground's ports, listened on from `make serve`'s check until each server binds its own, so that of two
    `make serve` started in the same second the second finds them taken instead of passing the check too.

    The Hub's ports are taken first and held until the Hub binds them, in-process; the ports of the servers that are
    processes of their own (SeaweedFS, the two emulators) last, each let go as its server starts to bind it
    itself: a second `make serve` stops at the Hub's port, held meanwhile, and never touches those. Whatever else
    takes such a port in that gap makes its server fail, which `handed_over` reports as PortsInUse.
    """

    def __init__(self, ports: Ports | None = None) -> None:
        """Listen on each of `ports`, or let go of all and raise PortsInUse naming the first one taken. None: the
        servers take free ones, and nothing is held."""
        self.ports = ports
        self._sockets: dict[int, socket.socket] = {}
        for port in (ports.hub, ports.hub_cdn, ports.s3, ports.gcs, ports.azure) if ports else ():
            holder = socket.socket()
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT does not count
            self._sockets[port] = holder
            try:
                holder.bind(("127.0.0.1", port))
                holder.listen()
            except OSError as error:
                self.close()
                if error.errno == errno.EADDRINUSE:
                    raise PortsInUse([port], ports) from None
                raise

    @contextmanager
    def handed_over(self, *ports: int | None) -> Iterator[None]:
        """Let go of `ports` (None: a free one) for the server the block starts to bind them; its failure to start,
        with one of them taken again by something else, is PortsInUse naming those."""
        for port in ports:
            if port in self._sockets:
                self._sockets.pop(port).close()
        try:
            yield
        except (OSError, RuntimeError) as error:  # a failed bind; SeaweedFS exiting early
            if self.ports and (busy := [port for port in ports if port is not None and not is_free(port)]):
                raise PortsInUse(busy, self.ports) from error
            raise

    def close(self) -> None:
        """Let go of the ports not handed over."""
        for holder in self._sockets.values():
            holder.close()
        self._sockets.clear()

    def __enter__(self) -> HeldPorts:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Playground:
    s3: SeaweedFS
    hub: HubServer
    gcs: FakeGCS
    azure: Azurite
    metadata_loc: str  # the Iceberg table's metadata file, on S3

    def variables(self) -> dict[str, str]:
        """The contract's variables that reach these servers: S3 (also the cache source's), the Hub, the table, Cloud
        Storage, Azure Blob Storage."""
        return {**self.s3.env(), "HF_ENDPOINT": self.hub.endpoint, "METADATA_LOC": self.metadata_loc,
                **self.gcs.env(), **self.azure.env()}  # fmt: skip

    def sources(self) -> list[str]:
        """What the servers hold, one line per server, in the URIs the programs take."""
        return [
            f"S3 (SeaweedFS) {self.s3.endpoint}: s3://models/all-MiniLM-L6-v2, s3://datasets/tiny-corpus",
            f"Hub {self.hub.endpoint}: hf://{MINILM_REPO}, hf://{CORPUS_REPO} (a dataset), hf://{PRIVATE_REPO} "
            f"(private: ACCESS_TOKEN={PRIVATE_TOKEN})",
            f"Iceberg table {TABLE_URI} (on S3, METADATA_LOC below): 9200 rows, partitioned, with a delete and an "
            "evolved schema",
            f"Cloud Storage (fake-gcs-server) {self.gcs.endpoint}: gs://models/all-MiniLM-L6-v2, "
            "gs://datasets/tiny-corpus",
            f"Azure Blob Storage (Azurite) {self.azure.endpoint}: az://models/all-MiniLM-L6-v2, "
            "az://datasets/tiny-corpus",
        ]


@contextmanager
def running(root: Path, held: HeldPorts | None = None) -> Iterator[Playground]:
    """The servers on `held`'s ports, each handed over as its server binds it (PortsInUse if one cannot), else on
    free ones; seeded, their data under `root`; stopped and removed on exit."""
    held = held or HeldPorts()
    s3_port, hub_port, cdn_port, gcs_port, azure_port = astuple(held.ports) if held.ports else (None,) * 5
    with ExitStack() as servers:
        with held.handed_over(s3_port):
            s3 = servers.enter_context(SeaweedFS.start(s3_port=s3_port, parent=root))
        with held.handed_over(hub_port, cdn_port):
            hub = servers.enter_context(HubServer(hub_port, cdn_port, parent=root))
        with held.handed_over(gcs_port):
            gcs = servers.enter_context(FakeGCS.start(parent=root, port=gcs_port))
        with held.handed_over(azure_port):
            azure = servers.enter_context(Azurite.start(parent=root, port=azure_port))
        seed_s3(s3)
        metadata_loc = seed_iceberg(s3, Path(tempfile.mkdtemp(prefix="catalog-", dir=root)))
        seed_hub(hub)
        seed_store(gcs.create_bucket, gcs.put_object)
        seed_store(azure.create_container, azure.put_blob)
        yield Playground(s3, hub, gcs, azure, metadata_loc)


def seed_s3(server: SeaweedFS) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket="models")
    s3.create_bucket(Bucket="datasets")
    for path, source in minilm_files().items():
        s3.upload_file(str(source), "models", f"all-MiniLM-L6-v2/{path}")
    for path, body in tiny_corpus().items():
        s3.put_object(Bucket="datasets", Key=f"tiny-corpus/{path}", Body=body)


def seed_store(create: Callable[[str], object], put: Callable[[str, str, bytes], object]) -> None:
    """The model and the corpus in `models` and `datasets`, as the S3 server holds them, through a store's own
    calls: `create(bucket)`, `put(bucket, name, body)`."""
    for bucket in ("models", "datasets"):
        create(bucket)
    for path, source in minilm_files().items():
        put("models", f"all-MiniLM-L6-v2/{path}", source.read_bytes())
    for path, body in tiny_corpus().items():
        put("datasets", f"tiny-corpus/{path}", body)


def seed_iceberg(server: SeaweedFS, catalog_dir: Path) -> str:
    """A small Iceberg table with a history (partitions, a delete, an evolved schema) on the S3 server."""
    from devkit.iceberg import evolving_table, sql_catalog

    return evolving_table(sql_catalog(catalog_dir, "s3://datasets/warehouse", server), "reviews").metadata_location


def seed_hub(hub: HubServer) -> None:
    model = minilm_files()
    hub.add_repo(MINILM_REPO, model)
    hub.add_repo(CORPUS_REPO, tiny_corpus(), repo_type="dataset")
    small = {path: source for path, source in model.items() if source.stat().st_size < 1_000_000}
    hub.add_repo(PRIVATE_REPO, small, private=True)
    hub.tokens[PRIVATE_TOKEN] = {PRIVATE_REPO}
