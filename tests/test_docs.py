"""The documentation stays true: its links lead somewhere, its figures are the results', the front page stays
a front page, and each store has its rows in the tables that have one per store. (Its snippets run in
test_doc_snippets.py; what it says of the programs, in each program's tests.)"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from devkit import docs
from devkit.conformance import fixtures
from initializers.config.contract import Config
from initializers.config.settings import setting_fields, settings_of
from initializers.config.signing import SigningOptions
from initializers.kubeflow import sdk
from initializers.sources import DATASET, MODEL, STORES

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


# Each store's rows: a store added to the composition root without its rows in the docs' tables fails here, naming
# the row it lacks (docs/architecture.md, "Adding a store", lists them).


def _scheme_list(schemes: Iterable[str]) -> list[str]:
    return [f"{scheme}://" for scheme in schemes]


def test_the_front_pages_programs_list_each_of_their_stores() -> None:
    programs = {program.program: program for program in (DATASET, MODEL)}
    listed = {}
    for first, _, stores in docs.rows(docs.page("README.md").split("Why use them", 1)[0]):
        name = next(name for name in programs if f"`{name}`" in first)
        listed[name] = re.findall(r"`([^`]+)`", stores)
    for name, program in programs.items():
        assert listed.get(name) == _scheme_list(program.schemes), (
            f"README.md: the {name}'s row lists {listed.get(name)}, its stores are {_scheme_list(program.schemes)}"
        )


def test_the_front_page_shows_a_run_from_each_store() -> None:
    shown = [block.code for block in docs.blocks(docs.section(docs.page("README.md"), "### From each source"))]
    for plugin in STORES:
        runs = [
            code
            for code in shown
            if re.search(rf"STORAGE_URI={plugin.scheme}://\S+.*\b({'|'.join(plugin.kinds)})-initializer\b", code)
        ]
        assert runs, f"README.md, From each source: no snippet runs STORAGE_URI={plugin.scheme}://..."


def _configuration_rows() -> list[tuple[set[str], str]]:
    """(variables named in its first cell, its `used by` cell) of each row of the configuration page's table."""
    table = docs.section(docs.page("docs/configuration.md"), "# Configuration").split("\n## ", 1)[0]
    return [(set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first)), used_by) for first, used_by, *_ in docs.rows(table)]


def _used_by(cell: str) -> set[str]:
    """The schemes a `used by` cell names (`all`: every store), what it says in parentheses left out."""
    named = {word.strip() for word in re.sub(r"\(.*?\)", "", cell).split(",")}
    return {plugin.scheme for plugin in STORES} if named == {"all"} else named


def test_the_configuration_page_says_which_stores_read_each_setting() -> None:
    rows = _configuration_rows()
    schemes = {plugin.scheme for plugin in STORES}
    strangers = [(names, cell) for names, cell in rows if not _used_by(cell) <= schemes]
    assert not strangers, f"docs/configuration.md: rows naming no store's scheme in `used by`: {strangers}"
    shared = dict(Config.settings())
    readers: dict[str, set[str]] = {}
    for plugin in STORES:
        own = [setting.env for group in plugin.options for _, setting in settings_of(group)]
        for env in own + [setting.env for name, setting in shared.items() if name not in plugin.refuses]:
            readers.setdefault(env, set()).add(plugin.scheme)
        for name in plugin.refuses:
            env = shared[name].env
            said = [cell for names, cell in rows if env in names]
            assert any(f"refused for {plugin.scheme}" in cell for cell in said), (
                f"docs/configuration.md: the {env} row does not say it is refused for {plugin.scheme}"
            )
    for env, stores in readers.items():
        documented = set().union(*[_used_by(cell) for names, cell in rows if env in names])
        assert stores <= documented, (
            f"docs/configuration.md: no row says {', '.join(sorted(stores - documented))} read {env}"
        )
        assert documented <= stores, (
            f"docs/configuration.md: a row says {', '.join(sorted(documented - stores))} read {env}, which their "
            "plug-ins do not declare"
        )


def test_the_configuration_page_gives_each_stores_uris() -> None:
    uri = next(cell for names, _, cell in docs.rows(docs.page("docs/configuration.md")) if names == "`STORAGE_URI`")
    spans = re.findall(r"`([^`]+)`", uri)
    given = list(dict.fromkeys(span for span in spans if span in {plugin.usage for plugin in STORES}))
    assert given == [plugin.usage for plugin in STORES], (
        f"docs/configuration.md: the STORAGE_URI row gives {given}, the stores' forms are "
        f"{[plugin.usage for plugin in STORES]}"
    )


#: A list of schemes in a message: `hf://, s3://` or `hf://..., s3://... or cache://...`.
_SCHEMES = re.compile(r"[a-z][a-z0-9]*://(?:\.\.\.)?(?:(?:,| or|, or) [a-z][a-z0-9]*://(?:\.\.\.)?)+")


def test_the_rejected_input_table_has_each_stores_uris_and_lists_every_store() -> None:
    table = docs.rows(docs.section(docs.page("docs/behaviour.md"), "## Rejected input"))
    for plugin in STORES:
        rows = [given for given, *_ in table if re.search(rf"`(STORAGE_URI=)?{plugin.scheme}://", given)]
        assert rows, f"docs/behaviour.md, Rejected input: no row refuses a {plugin.scheme}:// URI"
    programs = [_scheme_list(program.schemes) for program in (DATASET, MODEL)]
    for given, _, message in table:
        for found in _SCHEMES.findall(message):
            listed = re.findall(r"([a-z][a-z0-9]*://)", found)
            if {scheme[:-3] for scheme in listed} <= {plugin.scheme for plugin in STORES}:
                assert listed in programs, (
                    f"docs/behaviour.md, Rejected input: {given} lists {listed}, not a program's stores {programs}"
                )


def test_the_durability_page_says_what_each_store_vouches_for() -> None:
    table = docs.rows(docs.section(docs.page("docs/durability.md"), "### What each store vouches for"))
    said = {re.findall(r"`(\w+)://`", source)[0]: algorithms for source, algorithms, _ in table}
    for plugin in STORES:
        assert plugin.scheme in said, f"docs/durability.md, What each store vouches for: no row for {plugin.scheme}://"
        kinds = {kind for store in fixtures(plugin.scheme).values() for kind in store.source.checksum_kinds}
        written = set(re.findall(r"`([^`]+)`", said[plugin.scheme]))
        assert written == kinds and (kinds or said[plugin.scheme] == "none"), (
            f"docs/durability.md: the {plugin.scheme}:// row says {said[plugin.scheme]}, its store declares "
            f"{sorted(kinds) or 'none'}"
        )


def test_the_kubeflow_page_names_each_stores_sdk_classes_and_their_fields() -> None:
    table = docs.rows(docs.section(docs.page("docs/kubeflow.md"), "## Without Kubeflow"))
    said = {re.findall(r"`(\w+)://`", source)[0]: (dataset, model, made) for source, dataset, model, made in table}
    common = {"storage_uri", "ignore_patterns", "allow_patterns"} | {f.name for f in setting_fields(SigningOptions)}
    for plugin in STORES:
        assert plugin.scheme in said, f"docs/kubeflow.md: no row for the SDK classes of {plugin.scheme}://"
        dataset, model, made = said[plugin.scheme]
        for program, cell in ((DATASET, dataset), (MODEL, model)):
            step = next(
                (step for step in sdk.STEPS if step.kind.name == program.name and step.scheme == plugin.scheme), None
            )
            assert cell == (f"`{step.__name__}`" if step else ""), (
                f"docs/kubeflow.md: the {plugin.scheme}:// row's {program.name} class is {cell!r}, the SDK's is "
                f"{step and step.__name__}"
            )
            if step is not None and step not in sdk._KUBEFLOW:
                own = [f.name for f in fields(step) if f.name not in common]
                assert made.startswith("ours: ") and re.findall(r"`(\w+)`", made) == own, (
                    f"docs/kubeflow.md: the {plugin.scheme}:// row gives the fields {made!r}, {step.__name__} has {own}"
                )
            elif step is not None:
                assert made == "Kubeflow's", f"docs/kubeflow.md: {step.__name__} is Kubeflow's own class"


def test_the_scaling_page_says_which_stores_split_a_plan_and_which_shard_themselves() -> None:
    bullets = {
        line.split("**")[1]: re.findall(r"`(\w+)://`", line.split(")", 1)[0])  # the schemes in its parentheses
        for line in docs.page("docs/scaling.md").splitlines()
        if line.startswith("- **")
    }
    for title, splits in (("A split plan", True), ("Per-node cache shards", False)):
        stores = [plugin.scheme for plugin in STORES if plugin.splits_plan is splits]
        assert bullets[title] == stores, f"docs/scaling.md: {title} names {bullets[title]}, the stores are {stores}"


def test_the_architecture_pages_tree_has_each_stores_folder() -> None:
    tree = docs.first_block(docs.page("docs/architecture.md"), "")
    for plugin in STORES:
        folder = plugin.open.__module__.rpartition(".")[2]
        assert re.search(rf"^ {{4}}{folder}/ ", tree, re.MULTILINE), (
            f"docs/architecture.md: the tree has no sources/{folder}/ ({plugin.scheme}://)"
        )
