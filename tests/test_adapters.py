"""The adapters for third-party internals: the release range each was read against is the one the package pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from initializers.adapters import release, require
from initializers.common.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _pinned(requirement_prefix: str) -> tuple[str, str]:
    """The >=/< bounds pyproject.toml gives a requirement, wherever it is listed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    requirements = [*project["dependencies"], *(requirement for extra in extras for requirement in extra)]
    (found,) = [r for r in requirements if r.startswith(requirement_prefix)]
    at_least = re.search(r">=([\d.]+)", found)
    below = re.search(r"<([\d.]+)", found)
    assert at_least and below, f"{found!r} must pin a range: >=X,<Y"
    return at_least.group(1), below.group(1)


def _constrained(distribution: str) -> str:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    (line,) = [line for line in lines if line.startswith(distribution + "==")]
    return line.split("==")[1]


@pytest.mark.parametrize(("module", "requirement"), [("pyiceberg", "pyiceberg[pyarrow]"), ("botocore", "botocore")])
def test_each_adapter_checks_the_range_the_package_pins(module: str, requirement: str) -> None:
    adapter = __import__(f"initializers.adapters.{module}", fromlist=["AT_LEAST"])
    assert _pinned(requirement) == (adapter.AT_LEAST, adapter.BELOW)
    assert release(adapter.AT_LEAST) <= release(_constrained(module)) < release(adapter.BELOW)


def test_a_release_outside_the_range_is_refused_naming_the_library() -> None:
    require("click", "1", "99")
    with pytest.raises(ConfigError, match=r"click \S+ is installed, but .* >=99,<100"):
        require("click", "99", "100")


def test_releases_compare_by_their_numbers() -> None:
    assert release("0.12.0") == (0, 12, 0)
    assert release("1.44.8rc1") == (1, 44, 8)
    assert release("0.9") < release("0.12") < release("0.13") <= release("0.13.0")
