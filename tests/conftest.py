from __future__ import annotations

import hashlib
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the devkit package beside src/

from devkit.azurite import Azurite
from devkit.fake_gcs import FakeGCS
from devkit.moto import Moto, allow
from devkit.nginx import Nginx
from devkit.registry import Registry
from devkit.seaweed import SeaweedFS

#: Hypothesis bounds each example's time (200 ms) and its data's making by the wall clock, which shared cores and
#: parallel workers stretch: here a property fails only for what it asserts.
settings.register_profile("shared-cores", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-cores")

#: What makes a test `slow` (left out of `make test-quick`, which runs `-m "not slow"`): a real storage server's
#: fixture, or running the programs as processes (a run costs seconds of CPU), or building images. Found per test, by
#: the fixtures it uses and the names its code reaches through the module's own functions, so new tests are sorted
#: as they are added; mark a test `@pytest.mark.slow` by hand only for another reason.
SLOW_FIXTURES = frozenset({"seaweed", "moto", "runtime", "fake_gcs", "azurite", "registry", "nginx"})
SLOW_NAMES = frozenset({"run_program", "start_program", "images"})


def _reaches_slow_names(code: types.CodeType, module: types.ModuleType, seen: set[types.CodeType]) -> bool:
    """Whether `code`, or a function of `module` it names (or a function nested in it), uses a name in SLOW_NAMES."""
    if code in seen:
        return False
    seen.add(code)
    if SLOW_NAMES & set(code.co_names):
        return True
    nested = [const for const in code.co_consts if isinstance(const, types.CodeType)]
    called = [
        found.__code__
        for name in code.co_names
        if isinstance(found := getattr(module, name, None), types.FunctionType) and found.__module__ == module.__name__
    ]
    return any(_reaches_slow_names(other, module, seen) for other in nested + called)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        function = getattr(item, "function", None)
        if function is None:
            continue
        uses_servers = bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))
        if uses_servers or _reaches_slow_names(function.__code__, item.module, set()):
            item.add_marker(pytest.mark.slow)


# A session is a pytest-xdist worker's (`make test` runs several): each worker starts its own servers below, on ports
# no other process takes meanwhile (devkit/ports.py), in temp folders of their own; the images are built by one
# worker at a time (devkit/images.py's lock), the later ones finding them in the layer cache.
@pytest.fixture(scope="session")
def runtime() -> str:
    """Both images, built once a session (podman's layer cache makes it quick when the sources are unchanged, and a
    fresh machine builds them here), and the container engine that built them."""
    from devkit import images

    return images.build_all()


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


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[FakeGCS]:
    """Google Cloud Storage's JSON API (fake-gcs-server), no credentials checked: STORAGE_EMULATOR_HOST reaches it."""
    with FakeGCS.start() as server:
        yield server


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """Azure Blob Storage (Azurite, strict), SharedKey enforced for the development account."""
    with Azurite.start() as server:
        yield server


@pytest.fixture(scope="session")
def registry() -> Iterator[Registry]:
    """A container registry (CNCF Distribution), anonymous, over plain HTTP."""
    with Registry.start() as server:
        yield server


@pytest.fixture(scope="session")
def nginx() -> Iterator[Nginx]:
    """A web server (nginx) over a folder of its own: ranges, ETags, and a folder served without ranges."""
    with Nginx.start() as server:
        yield server


@pytest.fixture
def private_hf_client(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """huggingface_hub's client for these tests only: plain HTTP (no Xet), no agent look-up at huggingface.co, a
    private home (no stored token). It read its environment when imported, so its constants are set beside it."""
    from huggingface_hub import constants

    home = tmp_path_factory.mktemp("hf-home")
    settings = {"HF_HUB_DISABLE_XET": True, "HF_HUB_DISABLE_TELEMETRY": True, "HF_HUB_OFFLINE": False}
    paths = {"HF_HOME": home, "HF_HUB_CACHE": home / "hub", "HF_ASSETS_CACHE": home / "assets",
             "HF_XET_CACHE": home / "xet", "HF_TOKEN_PATH": home / "token"}  # fmt: skip
    for name, value in {**settings, **paths}.items():
        monkeypatch.setattr(constants, name, value if isinstance(value, bool) else str(value))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HOME", str(home))


@pytest.fixture(autouse=True)
def _secrets_hidden_by_one_test_alone() -> Iterator[None]:
    """What a test's settings or sources registered as secrets (`logs.hide`, at each read) is forgotten after it: a
    program's run is a process, the suite's tests share one."""
    from initializers.common import logs

    before = logs._redactor
    yield
    logs._redactor = before
