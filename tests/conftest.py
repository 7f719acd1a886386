from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the devkit package beside src/

from devkit.moto import Moto, allow
from devkit.seaweed import SeaweedFS


@pytest.fixture(scope="session")
def seaweed() -> Iterator[SeaweedFS]:
    with SeaweedFS.start() as server:
        yield server


@pytest.fixture(scope="session")
def s3(seaweed: SeaweedFS) -> Any:
    return seaweed.client()


@pytest.fixture
def bucket(request: pytest.FixtureRequest, s3: Any) -> str:
    """A fresh bucket per test, named after it. Parametrized cases share the first 50 characters of their names, so
    a digest of the whole test id tells them apart (an object address modulo 10000, as before, repeats)."""
    readable = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:50]
    name = f"{readable}-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    """moto's server with IAM enforced: `admin` may do anything, `direct` may read S3, `reader` may only assume
    the role `s3-reader` (which may read S3), and nobody but `admin` may assume `admin-only`."""
    with Moto.start() as server:
        admin = server.add_user("admin", allow("*"))
        server.add_user("direct", allow("s3:GetObject", "s3:ListBucket"))
        reader = server.add_user("reader", allow("sts:AssumeRole"))
        server.add_role("s3-reader", reader, allow("s3:GetObject", "s3:ListBucket"))
        server.add_role("admin-only", admin, allow("s3:GetObject", "s3:ListBucket"))
        server.enforce_auth()
        yield server
