"""The benchmark harness's before-and-after (BENCH_BEFORE): our program run from another checkout's code as one more
contender of the same rounds, and each table's ratio of after to before. (The suites themselves run as `make bench`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import BEFORE, Sample, table, with_before
from devkit.programs import clean_env


def _printing_its_package(out: Path) -> tuple[list[str], dict[str, str]]:
    """A stand-in for our program: it says where the `initializers` it imports comes from."""
    return [sys.executable, "-c", "import initializers; print(initializers.__file__)"], {"OUTPUT_PATH": str(out)}


def _peer(out: Path) -> tuple[list[str], dict[str, str]]:
    return ["true"], {}


def test_without_bench_before_the_contenders_are_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_BEFORE", raising=False)
    contenders = {"initializers": _printing_its_package, "peer": _peer}
    assert with_before(contenders, "initializers") == contenders


def test_bench_before_runs_our_program_from_that_code_right_after_ours(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = tmp_path / "before" / "src"
    (before / "initializers").mkdir(parents=True)
    (before / "initializers" / "__init__.py").write_text("")
    monkeypatch.setenv("BENCH_BEFORE", str(before))
    contenders = with_before({"initializers": _printing_its_package, "peer": _peer}, "initializers")
    assert list(contenders) == ["initializers", f"initializers{BEFORE}", "peer"]
    assert list((before / "initializers" / "__pycache__").glob("__init__.*.pyc")), "compiled before the first round"
    ours, theirs = contenders["initializers"](tmp_path / "out"), contenders[f"initializers{BEFORE}"](tmp_path / "out")
    assert theirs == (ours[0], {**ours[1], "PYTHONPATH": str(before)})
    ran = subprocess.run(theirs[0], env=clean_env(theirs[1]), capture_output=True, text=True, check=True)
    assert Path(ran.stdout.strip()) == before / "initializers" / "__init__.py", "that code wins over the install"


def test_bench_before_must_name_a_src_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BENCH_BEFORE", str(tmp_path))  # a checkout's root, not its src
    with pytest.raises(SystemExit, match=r"BENCH_BEFORE: .* holds no initializers package"):
        with_before({"initializers": _printing_its_package}, "initializers")


def test_a_table_gives_its_row_and_the_ratio_of_after_to_before() -> None:
    samples = {
        "initializers": [Sample(2.0, 1.0, 50), Sample(2.5, 1.2, 51), Sample(4.0, 1.1, 52)],
        f"initializers{BEFORE}": [Sample(2.5, 1.5, 50), Sample(5.0, 1.5, 50), Sample(3.0, 1.6, 50)],
        "s5cmd": [Sample(4.0, 2.0, 20)] * 3,
        "initializers re-run": [Sample(0.3, 0, 0)],
    }
    written = table("S3 A", 1_000_000_000, samples, "s5cmd")
    assert f"| initializers{BEFORE} | 333 (200-400) | 1.50 | 50, 50 | 1.33x |" in written
    # medians: 400 MB/s after and 333 before; 1.1 and 1.5 CPU s per GB
    assert written.endswith(f"\ninitializers against initializers{BEFORE}: 1.20x the rate, 0.73x the CPU per GB.\n")
    assert BEFORE not in table("S3 A", 1_000_000_000, {"s5cmd": samples["s5cmd"]}, "s5cmd")
