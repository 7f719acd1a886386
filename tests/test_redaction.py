"""Redaction: every form a secret can take in text is hidden, and ordinary text is left alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote, quote_plus

import pytest

from initializers.common import logs
from initializers.common.logs import PARTIAL_ECHO, REDACTED, Redactor
from initializers.destination import manifest
from initializers.sources import MODEL

SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxR"fiCY\\EXAMPLEKEY'


def hidden(text: str, *secrets: str) -> str:
    return Redactor(secrets or (SECRET,))(None, "", text)


@pytest.mark.parametrize(
    "form",
    [
        SECRET,
        repr(SECRET),
        repr(SECRET.encode()),
        json.dumps(SECRET),
        json.dumps(json.dumps(SECRET)),
        quote(SECRET, safe=""),
        quote(SECRET),
        quote_plus(SECRET),
        json.dumps(quote(SECRET, safe="")),
        SECRET[:PARTIAL_ECHO],
        SECRET[-PARTIAL_ECHO - 6 : -6],
        SECRET[5:30],
        json.dumps(SECRET[3:20]),
    ],
    ids=range(13),
)
def test_every_form_of_a_secret_is_hidden(form: str):
    line = json.dumps({"event": "failed", "error": f"the server said: {form} (that was all)"})
    redacted = hidden(line)
    assert REDACTED in redacted
    for start in range(len(SECRET) - PARTIAL_ECHO + 1):
        run = SECRET[start : start + PARTIAL_ECHO]
        assert run not in redacted or run.isupper()  # a run of one kind of character alone is not hidden
    assert redacted.endswith('(that was all)"}') and '"error": "the server said: ' in redacted


def test_ordinary_text_and_short_runs_are_left_alone():
    line = "listing s3://bucket/data at http://127.0.0.1:9000: 12 files, EXAMPL and wJalrXU"
    assert hidden(line) == line


def test_a_short_secret_is_hidden_only_whole_and_where_it_stands_alone():
    assert hidden("pass and password, passwo. key=passwo&x", "passwo") == "pass and password, ***. key=***&x"


def test_a_short_secret_never_hides_part_of_a_word_or_an_event_name():
    assert hidden('{"event": "failed", "error": "a"}', "a") == '{"event": "failed", "error": "***"}'
    assert hidden("source s3://datasets/latest-tests", "test") == "source s3://datasets/latest-tests"


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_field_names_and_event_names_are_never_hidden_whatever_the_secret(
    log_format: str, capsys: pytest.CaptureFixture[str]
):
    """A secret that is also a field name or an event name (or a word of one) hides values only: a filter on
    `event == "failed"` or a field keeps matching. A library's message, text from elsewhere, is a value."""
    import logging

    logs.configure(log_format, "info", ["files_done", "failed"])
    try:
        logs.get_logger("test").error("failed", files_done=3, error="the key files_done, failed", echoed=["failed"])
        logging.getLogger("urllib3").warning("sent files_done")
        try:
            raise RuntimeError("it said files_done")
        except RuntimeError:
            logs.get_logger("test").exception("failed")
    finally:
        logs.configure("json", "info", [])
    lines = capsys.readouterr().err.splitlines()
    if log_format == "json":
        entries = [json.loads(line) for line in lines]
        assert entries[0]["event"] == "failed" and entries[0]["files_done"] == 3
        assert entries[0]["error"] == "the key ***, ***" and entries[0]["echoed"] == ["***"]
        assert entries[1] == {**entries[1], "event": "sent ***", "library": "urllib3"}
        assert entries[2]["event"] == "failed" and entries[2]["exception"].endswith("RuntimeError: it said ***")
    else:
        assert " failed " in lines[0] and "files_done=3" in lines[0] and "error='the key ***, ***'" in lines[0]
        assert "sent ***" in lines[1] and "files_done" not in lines[1]
        assert any(line.endswith("RuntimeError: it said ***") for line in lines[2:])


def test_a_word_inside_a_secret_is_hidden_only_with_the_rest():
    secret = "initializers-test-secret-7f3a9c"
    assert hidden("waiting for another initializer", secret) == "waiting for another initializer"
    assert hidden(f"echoed {secret}, then {secret[18:]}", secret) == "echoed ***, then ***"


def test_the_manifest_hides_a_secret_the_source_description_holds(tmp_path):
    logs.configure("json", "error", [SECRET])
    try:
        source = {"uri": "s3://b/", "endpoint": f"http://user:{quote(SECRET, safe='')}@host"}
        now = datetime.now(UTC)
        text = b"".join(manifest.lines(MODEL, source, (), now, now, (0, 0), [])).decode()
        assert quote(SECRET, safe="") not in text and REDACTED in text
        assert manifest.describes(json.loads(text), source, 0)
    finally:
        logs.configure("json", "error", [])
