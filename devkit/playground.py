"""The demo's servers on loopback, seeded: `make demo` fetches from them, `make serve` keeps them up for a user, and
tests/test_readme_snippets.py runs the README's snippets against them.

S3 (SeaweedFS, its keys enforced): bucket `models` with all-MiniLM-L6-v2/, bucket `datasets` with tiny-corpus/ and
an Iceberg warehouse holding the table shop.reviews. The Hub: the same model and corpus, and a private model repo
that only PRIVATE_TOKEN may read.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devkit.hubserver import HubServer
from devkit.samples import CORPUS_REPO, MINILM_REPO, minilm_files, tiny_corpus
from devkit.seaweed import SeaweedFS


@dataclass(frozen=True)
class Ports:
    s3: int
    hub: int
    hub_cdn: int  # where the Hub redirects LFS downloads, as huggingface.co redirects them to its CDN


#: `make serve`'s ports, which the README's snippets name.
DOCUMENTED_PORTS = Ports(s3=8333, hub=8334, hub_cdn=8335)
TABLE_URI = "cache://shop/reviews"
PRIVATE_REPO = "initializers/private-model"
PRIVATE_TOKEN = "hf_playground"


@dataclass(frozen=True)
class Playground:
    s3: SeaweedFS
    hub: HubServer
    metadata_loc: str  # the Iceberg table's metadata file, on S3

    def variables(self) -> dict[str, str]:
        """The contract's variables that reach these servers: S3 (also the cache source's), the Hub, the table."""
        return {**self.s3.env(), "HF_ENDPOINT": self.hub.endpoint, "METADATA_LOC": self.metadata_loc}

    def sources(self) -> list[str]:
        """What the servers hold, one line per server, in the URIs the programs take."""
        return [
            f"S3 (SeaweedFS) {self.s3.endpoint}: s3://models/all-MiniLM-L6-v2, s3://datasets/tiny-corpus",
            f"Hub {self.hub.endpoint}: hf://{MINILM_REPO}, hf://{CORPUS_REPO} (a dataset), hf://{PRIVATE_REPO} "
            f"(private: ACCESS_TOKEN={PRIVATE_TOKEN})",
            f"Iceberg table {TABLE_URI} (on S3, METADATA_LOC below): 9200 rows, partitioned, with a delete and an "
            "evolved schema",
        ]


@contextmanager
def running(root: Path, ports: Ports | None = None) -> Iterator[Playground]:
    """The servers on `ports` (else free ones), seeded, their data under `root`; stopped and removed on exit."""
    s3_port, hub_port, cdn_port = (ports.s3, ports.hub, ports.hub_cdn) if ports else (None, None, None)
    with SeaweedFS.start(s3_port=s3_port, parent=root) as s3, HubServer(hub_port, cdn_port, parent=root) as hub:
        seed_s3(s3)
        metadata_loc = seed_iceberg(s3, Path(tempfile.mkdtemp(prefix="catalog-", dir=root)))
        seed_hub(hub)
        yield Playground(s3, hub, metadata_loc)


def seed_s3(server: SeaweedFS) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket="models")
    s3.create_bucket(Bucket="datasets")
    for path, source in minilm_files().items():
        s3.upload_file(str(source), "models", f"all-MiniLM-L6-v2/{path}")
    for path, body in tiny_corpus().items():
        s3.put_object(Bucket="datasets", Key=f"tiny-corpus/{path}", Body=body)


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
