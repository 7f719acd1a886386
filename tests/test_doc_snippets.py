"""The documentation's snippets, taken from its pages, run against `make serve` as a user runs them.

Convention (stated in the front page's "Try it"): each `sh`, `bash` or `python` block of a page (`devkit.docs.pages`:
README.md, then docs/ by name) is preceded by `<!-- playground: makes PATH ... -->` (run here, in one folder for all,
in the pages' order; each PATH must exist after it) or `<!-- not run: REASON -->`. Each runnable block runs in bash
after the `export` lines `make serve` printed, pasted as a user pastes them (a `python` block as `python FILE` there,
the venv's python being first on that PATH).
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from devkit import docs
from devkit.docs import Block, blocks
from devkit.playground import DOCUMENTED_PORTS

ROOT = docs.ROOT
SNIPPET_LANGUAGES = frozenset({"sh", "bash", "python"})
_PLAYGROUND = re.compile(r"^<!-- playground(?:: makes (?P<makes>.+?))? -->$")
_NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
#: A hang guard for one snippet, far above what any takes (about a second each here); never a performance bound.
SNIPPET_TIMEOUT = 300


def snippets(text: str) -> list[Block]:
    return [block for block in blocks(text) if block.language in SNIPPET_LANGUAGES]


def runnable(text: str) -> list[tuple[Block, list[str]]]:
    """The blocks marked `playground`, with the paths each says it leaves."""
    found = []
    for block in snippets(text):
        if marked := _PLAYGROUND.match(block.marker):
            found.append((block, (marked["makes"] or "").split()))
    return found


def _pages() -> list[tuple[str, str]]:
    """(name from the root, text) of every page, in reading order."""
    return [(str(path.relative_to(ROOT)), path.read_text()) for path in docs.pages()]


def test_every_snippet_is_marked_as_run_against_the_playground_or_not_run_with_a_reason() -> None:
    unmarked = [
        f"{name}:{block.line}: a ```{block.language} block without a playground or not-run marker"
        for name, text in _pages()
        for block in snippets(text)
        if not (_PLAYGROUND.match(block.marker) or _NOT_RUN.match(block.marker))
    ]
    assert not unmarked, "\n".join(unmarked)
    assert {block.language for _, text in _pages() for block, _ in runnable(text)} == {"sh", "python"}


def test_the_marker_convention_is_read_as_written() -> None:
    text = (
        "intro\n<!-- playground: makes a/b c -->\n```sh\necho hi\n```\n\n```\nsome output\n```\n"
        "<!-- not run: needs a cluster -->\n```python\nprint(1)\n```\n```bash\nls\n```\n"
    )
    assert [(b.line, b.language, b.code) for b in blocks(text)] == [
        (3, "sh", "echo hi\n"), (7, "", "some output\n"), (11, "python", "print(1)\n"), (14, "bash", "ls\n")
    ]  # fmt: skip
    assert [(block.code, makes) for block, makes in runnable(text)] == [("echo hi\n", ["a/b", "c"])]
    assert [block.marker for block in snippets(text)] == [
        "<!-- playground: makes a/b c -->", "<!-- not run: needs a cluster -->", "```"
    ]  # fmt: skip


@dataclass
class Serve:
    process: subprocess.Popen[str]
    exports: list[str]  # the lines it printed to paste
    data: Path  # the folder it said holds its servers' data

    def variable(self, name: str) -> str:
        return next(line.split("=", 1)[1] for line in self.exports if line.startswith(f"export {name}="))


def _start_serve(flags: list[str]) -> Serve | None:
    """`make serve`'s program, read up to its last line before Ctrl-C; None when, on the documented ports, it refuses
    them as in use (exit 1); any other exit before serving fails the test."""
    process = subprocess.Popen(
        [sys.executable, "-m", "devkit.serve", *flags], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    printed = []
    for line in process.stdout:
        printed.append(line.rstrip("\n"))
        if "Ctrl-C" in line:
            break
    else:
        if process.wait() == 1 and not flags:
            return None
        pytest.fail(f"make serve exited with {process.returncode} before serving:\n" + "\n".join(printed))
    data = Path(re.search(r"data in (\S+?)\)", printed[0])[1])  # type: ignore[index]
    return Serve(process, [line for line in printed if line.startswith("export ")], data)


def _descendants(pid: int) -> set[int]:
    """The processes under `pid`, from each one's parent in /proc/PID/stat (the second field after the name)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.slow  # real servers and a dozen program runs
def test_every_playground_snippet_runs_against_make_serve_and_leaves_its_files(tmp_path: Path) -> None:
    # The documented ports, as `make serve` takes them: held from its check until its servers bind them, so that
    # when anything else has one (a user's `make serve`, another suite's test) it refuses them, and free ones are
    # taken instead, written into the snippets.
    serve = _start_serve([]) or _start_serve(["--any-ports"])
    assert serve is not None
    try:
        children = _descendants(serve.process.pid)
        assert children, "SeaweedFS runs as make serve's child"
        ports = {
            f"http://127.0.0.1:{DOCUMENTED_PORTS.s3}": serve.variable("ENDPOINT"),
            f"http://127.0.0.1:{DOCUMENTED_PORTS.hub}": serve.variable("HF_ENDPOINT"),
        }
        shown = [block for _, text in _pages() for block in blocks(text) if block.code.startswith("export PATH=")]
        assert [[line.split("=")[0] for line in block.code.splitlines()] for block in shown] == [
            [line.split("=")[0] for line in serve.exports]
        ], "the front page shows the lines make serve prints"
        user = tmp_path / "user"
        user.mkdir()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
        ordered = [(name, block, makes) for name, text in _pages() for block, makes in runnable(text)]
        assert len({name for name, _, _ in ordered}) > 1, "snippets run wherever they live, not only on the front page"
        for number, (name, block, makes) in enumerate(ordered):
            code = block.code
            for documented, actual in ports.items():
                code = code.replace(documented, actual)
            if block.language == "python":
                (tmp_path / f"snippet-{number}.py").write_text(code)
                code = f"python {tmp_path / f'snippet-{number}.py'}\n"
            script = "\n".join([*serve.exports, "set -eo pipefail", code])
            done = subprocess.run(
                ["bash", "-c", script], cwd=user, env=env, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT
            )
            assert done.returncode == 0, f"{name}:{block.line} failed:\n{block.code}\n{done.stdout}{done.stderr}"
            missing = [path for path in makes if not (user / path).exists()]
            assert not missing, f"{name}:{block.line} left no {missing}:\n{block.code}\n{done.stdout}{done.stderr}"
    finally:
        serve.process.send_signal(signal.SIGINT)  # Ctrl-C
        code = serve.process.wait()
    assert code == 0
    assert "stopped by SIGINT" in serve.process.stdout.read()  # type: ignore[union-attr]
    assert not serve.data.exists(), "the servers' data is removed"
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()], "no server outlives make serve"


def test_make_serve_refuses_a_documented_port_in_use_naming_it() -> None:
    with socket.socket() as holder:
        try:
            holder.bind(("127.0.0.1", DOCUMENTED_PORTS.hub))
            holder.listen()
        except OSError:
            pass  # something else holds it already: the refusal is the same
        done = subprocess.run([sys.executable, "-m", "devkit.serve"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and not done.stdout, done.stdout
    assert f"port {DOCUMENTED_PORTS.hub}" in done.stderr or f", {DOCUMENTED_PORTS.hub}" in done.stderr, done.stderr
    assert "in use" in done.stderr
