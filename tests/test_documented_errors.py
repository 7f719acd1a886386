"""The rejected-input table of docs/behaviour.md, run as written: each row whose input is given as variables
(`NAME=value`, and `without NAME`) runs the program its message names with them, and must end with the exit code
and the message the row says.

Rows given in words (`a near miss of one of our variables`, `a download larger than the free space`) need a
server or a disk in a state a variable cannot say; each program's own tests check them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devkit import docs
from devkit.programs import run_program

_ASSIGNMENT = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)=(.*)$")
_PROGRAM = re.compile(r"\b(dataset|model)-initializer\b")
#: What every row runs with unless it says otherwise: an S3 source whose server is never reached (a refused port),
#: since every row is refused before the first request.
_BASE = {
    "STORAGE_URI": "s3://bucket/prefix",
    "ENDPOINT": "http://127.0.0.1:9",
    "ACCESS_KEY_ID": "documented-key",
    "SECRET_ACCESS_KEY": "documented-secret",
    "METADATA_LOC": "s3://bucket/warehouse/t/metadata/v1.metadata.json",  # read by cache:// rows only
}


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def _spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _rows() -> list[tuple[dict[str, str], str, int, str]]:
    """(variables, program, exit code, message) of every row whose input's first code is a variable's value."""
    table = docs.section(docs.page("docs/behaviour.md"), "## Rejected input")
    found = []
    for row in table.splitlines():
        if not row.startswith("| ") or row.startswith(("| input |", "|---")):
            continue
        given, code, message = _cells(row)
        if not _spans(given) or not _ASSIGNMENT.match(_spans(given)[0]):
            continue
        first = re.split(r"\(or | or ", given)[0]  # the first alternative: `A=1` (or `B=2`)
        env = dict(match.groups() for span in _spans(first) if (match := _ASSIGNMENT.match(span)))
        env |= dict.fromkeys(re.findall(r"without `([A-Z_]+)`", first), "")  # empty counts as unset
        said = _spans(message)[0]
        program = _PROGRAM.search(said)
        found.append((env, program[1] if program else "dataset", int(code), said))
    return found


ROWS = _rows()


def test_the_table_has_rows_given_as_variables() -> None:
    assert len(ROWS) >= 8, ROWS


@pytest.mark.parametrize(("env", "program", "code", "message"), ROWS, ids=[str(row[0]) for row in ROWS])
def test_a_documented_rejection_happens_as_written(
    env: dict[str, str], program: str, code: int, message: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_program(program, {**_BASE, "OUTPUT_PATH": str(out), **env})
    assert result.code == code, result.stderr
    error = result.last.get("error", "")
    for fragment in message.split("..."):
        assert fragment.strip(" ,") in error, f"documented {message!r}, said {error!r}"
    assert not out.exists(), "a rejected run leaves nothing behind"
