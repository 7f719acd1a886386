"""The documentation stays true: its links lead somewhere, its figures are the results', and the front page stays
a front page. (Its snippets run in test_doc_snippets.py; what it says of the programs, in each program's tests.)"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml

from devkit import docs

FRONT_PAGE_MOST_LINES = 300
#: A ratio written as a figure (`2.72x`, `26x`), not the `x` of a size (`1000 x 64 KiB`).
_RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x(?!\w)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")

RESULTS = """# Benchmark results

`make bench` on vm: 2 cores, 3.11.7, 2026-12-06 16:02 UTC; 3 interleaved rounds

## Goals

| goal | measured | met |
|---|---|---|
| Network N1, RTT 20 ms: >= 2.0x aws | 2.22x | yes |
| Network N2, RTT 20 ms: >= 2.0x aws | 2.49x | yes |
| Scale 100 k: peak RSS <= 100 MB | 58 MB | yes |

## Tables
"""


def _name(path: Path) -> str:
    return str(path.relative_to(docs.ROOT))


@pytest.mark.parametrize("path", docs.pages(), ids=_name)
def test_every_link_leads_to_a_file_and_every_anchor_to_a_heading(path: Path) -> None:
    text = path.read_text()
    broken = []
    for target in _LINK.findall(docs.prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # another site's
        file, _, fragment = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in docs.anchors(destination.read_text()):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{_name(path)}: " + "; ".join(broken)


@pytest.mark.parametrize("path", docs.pages(), ids=_name)
def test_the_figures_a_page_quotes_are_those_of_bench_results(path: Path) -> None:
    text = path.read_text()
    assert docs.generated(text, docs.RESULTS.read_text(), path.parent) == text, (
        f"{_name(path)} quotes figures bench/results.md no longer holds: run make docs"
    )


@pytest.mark.parametrize("path", docs.pages(), ids=_name)
def test_no_ratio_is_written_by_hand(path: Path) -> None:
    copied = [line for line in docs.prose(path.read_text()).splitlines() if _RATIO.search(line)]
    assert not copied, f"{_name(path)}: quote bench/results.md's goals instead:\n" + "\n".join(copied)


def test_the_front_page_is_short_links_every_page_and_quotes_figures() -> None:
    front = (docs.ROOT / "README.md").read_text()
    assert len(front.splitlines()) <= FRONT_PAGE_MOST_LINES
    linked = {target.partition("#")[0] for target in _LINK.findall(front)}
    assert {_name(path) for path in docs.pages()[1:]} <= linked, "every page of docs/ is linked from the front page"
    assert "<!-- figures from bench/results.md:" in front


def test_figures_are_written_from_the_goals_they_name_and_refuse_a_goal_not_there() -> None:
    marker = "<!-- figures from bench/results.md: Network N2 | Scale -->\n"
    page = f"before\n{marker}stale | 9.99x\n<!-- end of figures -->\nafter\n"
    written = docs.generated(page, RESULTS, docs.ROOT)
    assert written.startswith(f"before\n{marker}")
    assert "(vm: 2 cores, 3.11.7, 2026-12-06 16:02 UTC;" in written and "9.99x" not in written
    assert (
        "| Network N2, RTT 20 ms: >= 2.0x aws | 2.49x | yes |\n| Scale 100 k: peak RSS <= 100 MB | 58 MB | yes |\n"
        in written
    )
    assert "Network N1" not in written and written.endswith("<!-- end of figures -->\nafter\n")
    assert "](bench/results.md)" in written and "](../bench/results.md)" in docs.generated(
        page, RESULTS, docs.ROOT / "docs"
    )
    assert docs.generated(written, RESULTS, docs.ROOT) == written
    with pytest.raises(ValueError, match="'Network N9'"):
        docs.generated(page.replace("Network N2", "Network N9"), RESULTS, docs.ROOT)
    assert "Network N1" in docs.generated(page.replace("Network N2 | Scale", "*"), RESULTS, docs.ROOT)


def test_prose_leaves_out_fenced_blocks_and_generated_figures_and_anchors_are_githubs() -> None:
    figures = "<!-- figures from bench/results.md: * -->\n1.5x\n<!-- end of figures -->\n"
    text = f"# A `b`: c's\n```\n# not a heading 2.5x\n```\n{figures}ok\n"
    assert docs.prose(text) == "# A `b`: c's\n\nok"
    assert docs.anchors(text) == {"a-b-cs"}
    assert docs.anchor("Kubeflow's `initializer_timeout`") == "kubeflows-initializer_timeout"
    assert docs.section("# A\n## B\nb\n```\n## in code\n```\n### C\nc\n## D\nd\n", "## B") == (
        "## B\nb\n```\n## in code\n```\n### C\nc\n"
    )


def test_the_front_pages_init_container_is_the_one_of_deploy_job_yaml() -> None:
    shown = yaml.safe_load(docs.first_block(docs.page("README.md"), "yaml"))["initContainers"][0]
    job = yaml.safe_load(docs.page("deploy/job.yaml"))
    played = next(c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == shown["name"])
    assert {key: played[key] for key in shown} == shown


def test_the_live_views_frame_in_the_docs_is_what_the_view_draws() -> None:
    from rich.console import Console

    from initializers.transfer import live_view
    from initializers.transfer.progress import InFlight, Snapshot

    behaviour = docs.page("docs/behaviour.md")
    shown = docs.first_block(behaviour.split("(a frame of a run, 80 columns wide):")[1], "")
    in_flight = (
        InFlight("model-00001-of-00002.safetensors", 6_000_000, 2_800_000),
        InFlight("model-00002-of-00002.safetensors", 3_000_000, 2_400_000),
    )
    run = Snapshot(2, 4, 6_500_000, 10_500_000, listing_done=True, seconds=3.25, in_flight=in_flight)
    console = Console(width=80, file=io.StringIO(), force_terminal=True, color_system="standard")
    console.print(live_view.frame(run, 80))
    assert re.sub(r"\x1b\[[0-9;]*m", "", console.file.getvalue()) == shown
