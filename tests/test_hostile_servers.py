"""The programs against servers posing as the Hub and S3 that break the protocol, lie or attack (devkit/hostile.py).

Every run is a real program run: its exit code and last log line are what a user sees. Whatever a server does,
a run ends with a clear error naming the server (exit 1), or a bad configuration is refused before any request
(exit 2); nothing is written past the size a file was listed at; no secret reaches the output in any form.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from devkit.hostile import Answer, HubPoser, Poser, S3Poser, Seen, endless, git_blob_id, json_answer, listing_page
from devkit.programs import ProgramResult, run_program

#: A quote and a backslash: its repr, JSON and URL forms all differ from it.
TOKEN = 'hf_Hostile"Tok\\en_7f3a9c2e1b5d'
SECRET_KEY = 's3cr3t/Key+With\\Quote"9d8c7b6a'
FILES = {"config.json": b'{"hidden_size": 8}', "model.safetensors": b"S" * 21}


def secret_forms(secret: str) -> set[str]:
    """How a secret may show in output, written out here independently of the redactor."""
    once = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    return once | {json.dumps(form)[1:-1] for form in once} | {secret[:12], secret[-12:]}


def assert_secret_hidden(result: ProgramResult, secret: str, *more: str) -> None:
    for text in (result.stdout, result.stderr, *more):
        for form in secret_forms(secret):
            assert form not in text, f"{form!r} leaked"


def assert_failed(result: ProgramResult, code: int, *phrases: str) -> str:
    """The run failed with `code`, and its last line says why in these words, not as an internal error."""
    assert result.code == code, result.stdout[-3000:] + result.stderr[-2000:]
    error = result.last.get("error", "")
    assert result.last.get("event") == "failed" and "internal error" not in error, result.stderr[-3000:]
    for phrase in phrases:
        assert phrase in error, error
    return error


def largest_file(root: Path) -> int:
    """The size of the largest file under `root` a body went into, temporaries included (not the state files)."""
    return max(
        (
            path.stat().st_size
            for path in root.rglob("*")
            if path.is_file() and (".initializer" not in path.parts or "tmp" in path.relative_to(root).parts[:2])
        ),
        default=0,
    )


@pytest.fixture
def hub() -> Iterator[HubPoser]:
    with HubPoser(FILES) as poser:
        yield poser


@pytest.fixture
def s3() -> Iterator[S3Poser]:
    with S3Poser({"data/a.txt": b"a" * 1000, "data/b.txt": b"b" * 10}) as poser:
        yield poser


def run_hub(hub: HubPoser, tmp_path: Path, **env: str) -> ProgramResult:
    base = {"STORAGE_URI": hub.uri, "HF_ENDPOINT": hub.url, "HOME": str(tmp_path)}
    return run_program("model", {**base, "OUTPUT_PATH": str(tmp_path / "out"), **env}, timeout=120)


def run_s3(s3: S3Poser, tmp_path: Path, **env: str) -> ProgramResult:
    base = {"STORAGE_URI": s3.uri, "ENDPOINT": s3.url, "ANONYMOUS": "true", "HOME": str(tmp_path)}
    return run_program("dataset", {**base, "OUTPUT_PATH": str(tmp_path / "out"), **env}, timeout=120)


# --- a well-behaved poser, as the baseline every case departs from ----------------------------------------------


def test_the_posers_serve_a_complete_run(hub: HubPoser, s3: S3Poser, tmp_path: Path) -> None:
    assert run_hub(hub, tmp_path / "hub").code == 0
    assert (tmp_path / "hub/out/model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert run_s3(s3, tmp_path / "s3").code == 0
    assert (tmp_path / "s3/out/data/a.txt").read_bytes() == b"a" * 1000


# --- configuration that would forge requests: refused before any is sent ---------------------------------------


@pytest.mark.parametrize("variable", ["ACCESS_TOKEN", "HF_TOKEN"])
@pytest.mark.parametrize("inside", ["\nX-Injected: 1", "\r\nX-Injected: 1", "\t", "\x1b[2J", "\x7f", "\n\n", "\u20ac"])
def test_a_token_with_a_control_character_is_refused_naming_the_variable(
    hub: HubPoser, tmp_path: Path, variable: str, inside: str
) -> None:
    token = TOKEN + inside
    result = run_hub(hub, tmp_path, **{variable: token})
    error = assert_failed(result, 2, variable, "character", "value not shown")
    assert_secret_hidden(result, TOKEN)
    assert "X-Injected" not in result.stdout + result.stderr, error
    assert hub.seen == []  # nothing was sent


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_token_with_the_trailing_newline_of_a_secret_file_works(hub: HubPoser, tmp_path: Path, newline: str) -> None:
    result = run_hub(hub, tmp_path, ACCESS_TOKEN=TOKEN + newline)
    assert result.code == 0, result.stderr[-2000:]
    assert {seen.headers.get("authorization") for seen in hub.seen} == {f"Bearer {TOKEN}"}
    assert_secret_hidden(result, TOKEN)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ACCESS_KEY_ID", "AKID\r\nX-Injected: yes"),
        ("SECRET_ACCESS_KEY", SECRET_KEY[:10] + "\n" + SECRET_KEY[10:]),
        ("REGION", "us-east-1\nX-Injected: yes"),
        ("ENDPOINT", "http://127.0.0.1:1/\r\nX-Injected: yes"),
        ("ROLE_ARN", "arn:aws:iam::123456789012:role/r\nX"),
        ("STORAGE_URI", "s3://bucket/data\r\nX-Injected: yes"),
    ],
)
def test_header_and_url_values_with_control_characters_are_refused(
    s3: S3Poser, tmp_path: Path, variable: str, value: str
) -> None:
    keys = {"ACCESS_KEY_ID": "AKIDHOSTILE", "SECRET_ACCESS_KEY": SECRET_KEY, "ANONYMOUS": "false"}
    result = run_s3(s3, tmp_path, **{**keys, variable: value})
    assert_failed(result, 2, variable, "control character")
    assert "X-Injected" not in result.stdout + result.stderr
    assert_secret_hidden(result, SECRET_KEY)
    assert s3.seen == []


def test_the_sdk_builder_drops_a_trailing_newline_and_refuses_control_characters() -> None:
    from initializers.common.errors import ConfigError
    from initializers.kubeflow.sdk import HuggingFaceModelInitializer, S3DatasetInitializer, program_env

    built = HuggingFaceModelInitializer(storage_uri="hf://org/model", access_token=TOKEN + "\n")
    assert program_env(built)["ACCESS_TOKEN"] == TOKEN
    with pytest.raises(ConfigError, match="ACCESS_TOKEN: contains the control character U\\+000A") as refused:
        HuggingFaceModelInitializer(storage_uri="hf://org/model", access_token=TOKEN + "\nX: 1")
    assert TOKEN not in str(refused.value)
    with pytest.raises(ConfigError, match="ACCESS_KEY_ID"):
        S3DatasetInitializer(storage_uri="s3://bucket", access_key_id="AKID\r\nX-Injected: yes")


# --- secrets echoed back by a server: hidden in every form ----------------------------------------------------


def _echo_authorization(seen: Seen) -> Answer:
    """An error that quotes the request's credentials back, whole, JSON-escaped, URL-encoded and cut short."""
    authorization = seen.headers.get("authorization", "")
    echoed = {"whole": authorization, "quoted": quote(authorization), "cut": authorization[:20]}
    return json_answer({"error": f"bad credentials {json.dumps(echoed)}"}, 400, {"X-Error-Message": json.dumps(echoed)})


@pytest.mark.parametrize("where", ["revision", "resolve"])
def test_a_token_echoed_in_an_error_never_reaches_the_output(hub: HubPoser, tmp_path: Path, where: str) -> None:
    hub.answer(f"/{where}/", _echo_authorization)
    termination = tmp_path / "termination-log"
    termination.touch()
    result = run_hub(hub, tmp_path, ACCESS_TOKEN=TOKEN, INITIALIZERS_TERMINATION_LOG=str(termination))
    assert_failed(result, 1, "***")
    assert hub.requests(f"/{where}/")[0].headers["authorization"] == f"Bearer {TOKEN}"  # it was echoed
    assert_secret_hidden(result, TOKEN, termination.read_text())
    assert "failed (exit 1)" in termination.read_text()


# --- answers of the wrong shape: a clear exit 1 naming the server -----------------------------------------------


@pytest.mark.parametrize(
    "info",
    [
        {"id": HubPoser.REPO, "sha": HubPoser.COMMIT, "siblings": "not a list"},
        {"id": HubPoser.REPO, "sha": 12345},
        {"id": HubPoser.REPO},
        [HubPoser.COMMIT],
        "a string",
    ],
    ids=["siblings-a-string", "sha-a-number", "no-sha", "a-list", "a-string"],
)
def test_a_repo_info_of_the_wrong_shape_is_a_clear_failure(hub: HubPoser, tmp_path: Path, info: object) -> None:
    hub.info = info
    assert_failed(run_hub(hub, tmp_path), 1, f"the Hub at {hub.url}")


@pytest.mark.parametrize(
    "entries",
    [
        {"path": "config.json"},
        [{"type": "file", "path": "config.json"}],
        [{"type": "file", "path": "config.json", "size": "big", "oid": "0" * 40}],
        [{"type": "file", "path": "config.json", "size": -1, "oid": "0" * 40}],
        [{"type": "file", "path": 7, "size": 1, "oid": "0" * 40}],
        [{"type": "file", "path": "config.json", "size": 18, "oid": "not hex"}],
        [{"type": "file", "path": "w.safetensors", "size": 1, "oid": "0" * 40, "lfs": "nope"}],
        ["config.json"],
    ],
    ids=["a-dict", "no-size", "size-a-string", "size-negative", "path-a-number", "oid-not-hex", "lfs-a-string", "strs"],
)
def test_a_tree_of_the_wrong_shape_is_a_clear_failure(hub: HubPoser, tmp_path: Path, entries: object) -> None:
    hub.entries = entries
    assert_failed(run_hub(hub, tmp_path), 1, hub.url)  # `the Hub at URL: ...`, or `listing hf://o/n at URL: ...`


@pytest.mark.parametrize("what", ["/revision/", "/tree/"])
def test_html_where_json_belongs_is_a_clear_failure(hub: HubPoser, tmp_path: Path, what: str) -> None:
    hub.answer(what, Answer(headers={"Content-Type": "text/html"}, body=b"<html><body>Welcome!</body></html>"))
    assert_failed(run_hub(hub, tmp_path), 1, f"the Hub at {hub.url}")


# --- pagination: the token stays home, loops end ------------------------------------------------------------------


def test_a_next_page_on_another_origin_is_fetched_without_the_token(hub: HubPoser, tmp_path: Path) -> None:
    with Poser() as other:
        other.answer("/tree/", json_answer([]))
        hub.answer(
            "/tree/", json_answer(hub.entries, headers={"Link": f'<{other.url}/api/tree/?cursor=2>; rel="next"'})
        )
        result = run_hub(hub, tmp_path, ACCESS_TOKEN=TOKEN)
        assert result.code == 0, result.stderr[-2000:]
        assert other.requests("/tree/") and all("authorization" not in seen.headers for seen in other.seen)
    assert hub.requests("/tree/")[0].headers["authorization"] == f"Bearer {TOKEN}"


def _paging(hub: HubPoser, next_of: dict[str, str]) -> None:
    """Empty tree pages named by their `cursor` (none for the first), each linking to the one `next_of` names ("="
    for the page itself, as the request named it): only the links can tell that the listing goes round."""

    def page(seen: Seen) -> Answer:
        following = next_of[seen.query.get("cursor", "")]
        link = hub.url + seen.target if following == "=" else f"{hub.url}/api/tree/?cursor={following}"
        return json_answer([], headers={"Link": f'<{link}>; rel="next"'})

    hub.answer("/tree/", page)


@pytest.mark.parametrize(
    "next_of", [{"": "="}, {"": "a", "a": "="}, {"": "a", "a": "b", "b": "a"}], ids=["first", "later", "cycle"]
)
def test_a_tree_whose_links_come_back_is_refused(hub: HubPoser, tmp_path: Path, next_of: dict[str, str]) -> None:
    _paging(hub, next_of)
    assert_failed(run_hub(hub, tmp_path), 1, f"the Hub at {hub.url}", "would never end")
    assert len(hub.requests("/tree/")) <= 2 * 5  # a few pages, each perhaps retried, not thousands


def test_a_tree_of_endless_empty_pages_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer(
        "/tree/",
        lambda seen: json_answer(
            [], headers={"Link": f'<{hub.url}/api/tree/?cursor={int(seen.query.get("cursor", 0)) + 1}>; rel="next"'}
        ),
    )
    assert_failed(run_hub(hub, tmp_path), 1, "pages in a row without an entry", "would never end")


def test_a_tree_whose_fresh_pages_repeat_entries_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer(
        "/tree/",
        lambda seen: json_answer(
            hub.entries,
            headers={"Link": f'<{hub.url}/api/tree/?cursor={int(seen.query.get("cursor", 0)) + 1}>; rel="next"'},
        ),
    )
    assert_failed(run_hub(hub, tmp_path), 1, "again", "loop")


# --- bodies: never past the size asked for; redirects: only http(s) ---------------------------------------------

LISTED = len(FILES["model.safetensors"])


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_an_endless_body_is_refused_at_the_listed_size(hub: HubPoser, tmp_path: Path, framing: str) -> None:
    hub.answer("/resolve/.*safetensors", Answer(body=endless(), framing=framing))  # type: ignore[arg-type]
    assert_failed(run_hub(hub, tmp_path), 1, "model.safetensors", f"more than the {LISTED} bytes asked for")
    assert largest_file(tmp_path / "out") <= LISTED
    assert len(hub.requests("/resolve/.*safetensors")) == 1  # not asked again into the disk


def test_a_range_longer_than_asked_is_refused_within_the_range(s3: S3Poser, tmp_path: Path) -> None:
    """The first answer breaks off halfway; the resumed one, a 206 for the rest, does not stop at its end."""
    first_half = Answer(headers={"Content-Length": "1000"}, body=iter([b"a" * 500]), framing="close")
    endless_rest = Answer(206, {"Content-Range": "bytes 500-999/1000"}, endless(b"a" * 1000), framing="chunked")
    s3.answer("/data/a.txt", lambda seen: endless_rest if "range" in seen.headers else first_half)
    assert_failed(run_s3(s3, tmp_path), 1, "s3://bucket/data/a.txt", "more than the 500 bytes asked for")
    assert largest_file(tmp_path / "out") <= 1000
    assert [seen.headers.get("range") for seen in s3.requests("/data/a.txt")] == [None, "bytes=500-999"]


def test_a_hub_range_of_another_length_than_asked_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    """The first answer breaks off; the resumed one names the rest as its Content-Range but announces fewer bytes:
    refused before a byte of it is written, as every store's range answers are (`sources/http/objects.py`)."""
    content, rest = FILES["model.safetensors"], f"bytes 5-{LISTED - 1}"
    first = Answer(headers={"Content-Length": str(LISTED)}, body=iter([content[:5]]), framing="close")
    short = Answer(206, {"Content-Range": f"{rest}/{LISTED}"}, content[5:15])
    hub.answer("/resolve/.*safetensors", lambda seen: short if "range" in seen.headers else first)
    assert_failed(run_hub(hub, tmp_path), 1, "model.safetensors", f"asked for {rest}")
    asked = [seen.headers.get("range") for seen in hub.requests("/resolve/.*safetensors")]
    assert asked == [None, f"bytes=5-{LISTED - 1}"]  # refused at once, not resumed from the 10 bytes it sent
    assert not (tmp_path / "out/model.safetensors").exists()


def test_an_object_of_undeclared_length_is_refused_at_once(s3: S3Poser, tmp_path: Path) -> None:
    s3.answer("/data/b.txt", Answer(body=endless(), framing="chunked"))
    assert_failed(run_s3(s3, tmp_path), 1, "s3://bucket/data/b.txt", "the listing said 10 bytes", "no Content-Length")
    assert largest_file(tmp_path / "out") <= 1000
    assert len(s3.requests("/data/b.txt")) == 1


@pytest.mark.parametrize("scheme", ["gopher", "file", "ftp"])
def test_a_redirect_to_another_scheme_is_refused_at_once(hub: HubPoser, tmp_path: Path, scheme: str) -> None:
    location = f"{scheme}://127.0.0.1:{hub.url.rsplit(':', 1)[1]}/x"
    hub.answer("/resolve/.*safetensors", Answer(302, {"Location": location}))
    assert_failed(run_hub(hub, tmp_path), 1, f"redirected to a {scheme}:// URL", "only http:// and https://")
    assert len(hub.requests("/resolve/.*safetensors")) == 1
    assert not hub.requests("^/x")


def test_a_redirect_to_no_url_is_refused_at_once(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer("/resolve/.*safetensors", Answer(302, {"Location": "http://[::1/x"}))  # an unclosed IPv6 bracket
    assert_failed(run_hub(hub, tmp_path), 1, "redirected to 'http://[::1/x', which is no URL")
    assert len(hub.requests("/resolve/.*safetensors")) == 1


def test_an_api_redirect_to_another_scheme_is_refused_at_once(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer("/revision/", Answer(302, {"Location": "gopher://127.0.0.1:1/x"}))
    assert_failed(run_hub(hub, tmp_path), 1, "gopher://", "only http(s)")
    assert len(hub.requests("/revision/")) == 1


def test_a_trickle_is_timed_out_by_read_timeout(hub: HubPoser, tmp_path: Path) -> None:
    """A byte every 50 ms never leaves a read waiting READ_TIMEOUT, but is far below the minimum rate."""
    hub.files["model.safetensors"] = b"S" * 100_000
    hub.entries[1].update(size=100_000, oid=git_blob_id(hub.files["model.safetensors"]))
    hub.answer("/resolve/.*safetensors", Answer(body=endless(b"S"), framing="chunked", pause=0.05))
    assert_failed(run_hub(hub, tmp_path, READ_TIMEOUT="1"), 1, "slower than 64 KiB per read timeout (1 s)")


def test_retry_after_beyond_the_budget_says_what_was_asked_and_allowed(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer("/resolve/", Answer(429, {"Retry-After": "3600"}, b"slow down"))
    assert_failed(run_hub(hub, tmp_path), 1, "asked to wait 3600 s", "beyond the 330 s")
    assert len(hub.requests("/resolve/")) <= len(FILES)  # one per file at most: the wait is not taken


def test_a_retry_that_finds_the_source_held_beyond_the_budget_gives_up_at_once(hub: HubPoser, tmp_path: Path) -> None:
    """config.json's first answer, a 500, is sent once model.safetensors has been answered a 429 holding the source for
    an hour: its retry, after the backoff, finds the hold and gives up at once instead of sleeping through it (which
    kept the failing run's process alive for the hour)."""
    throttled = threading.Event()

    def model(_seen: Seen) -> Answer:
        throttled.set()
        return Answer(429, {"Retry-After": "3600"}, b"slow down")

    def config(seen: Seen) -> Answer | None:
        if len(hub.requests("/resolve/.*config.json")) > 1:
            return None  # the retry: answered as the Hub would, if it is ever sent
        throttled.wait(30)
        return Answer(500, {}, b"oops")

    hub.answer("/resolve/.*safetensors", model)
    hub.answer("/resolve/.*config.json", config)
    assert_failed(run_hub(hub, tmp_path), 1, "asked to wait 3600 s", "beyond the 330 s")


# --- what holds today, and must keep holding ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "a\x00b", "."], ids=repr)
def test_a_tree_path_outside_the_output_is_refused(hub: HubPoser, tmp_path: Path, path: str) -> None:
    """Every listed file is selected (IGNORE_PATTERNS set but empty), so the path check itself is what refuses it:
    a path no rule selects is never fetched, so never checked."""
    hub.files[path] = b"evil"
    hub.entries.append({"type": "file", "path": path, "size": 4, "oid": git_blob_id(b"evil")})
    assert_failed(run_hub(hub, tmp_path / "run", IGNORE_PATTERNS=""), 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("clash", ["config.json/inner", "model.safetensors"], ids=["file-and-folder", "twice"])
def test_a_tree_whose_paths_clash_is_refused(hub: HubPoser, tmp_path: Path, clash: str) -> None:
    hub.entries.append({"type": "file", "path": clash, "size": 1, "oid": git_blob_id(b"x")})
    assert_failed(run_hub(hub, tmp_path, IGNORE_PATTERNS=""), 1, clash)
    assert not (tmp_path / "out/.initializer/manifest.json").exists()


def test_a_wrong_digest_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    hub.files["model.safetensors"] = b"T" * LISTED  # the listed size, other bytes
    assert_failed(run_hub(hub, tmp_path), 1, "model.safetensors")
    assert not (tmp_path / "out/model.safetensors").exists()


def test_a_body_shorter_than_listed_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer("/resolve/.*safetensors", lambda _seen: Answer(body=iter([b"S" * 5]), framing="close"))
    assert_failed(run_hub(hub, tmp_path), 1, "model.safetensors")
    assert not (tmp_path / "out/model.safetensors").exists()


def test_a_redirect_loop_is_refused(hub: HubPoser, tmp_path: Path) -> None:
    hub.answer("/resolve/.*safetensors", lambda seen: Answer(302, {"Location": seen.target}))
    assert_failed(run_hub(hub, tmp_path), 1, "more than 10 redirects")


def test_a_huge_error_body_is_not_read_whole(hub: HubPoser, s3: S3Poser, tmp_path: Path) -> None:
    hub.answer("/resolve/", Answer(404, body=endless(), framing="chunked"))
    assert_failed(run_hub(hub, tmp_path / "hub"), 1, "is missing at the resolved commit (404)")
    s3.answer("/data/", Answer(403, body=endless(b"<Error>" * 100), framing="chunked"))
    assert_failed(run_s3(s3, tmp_path / "s3"), 1, "S3 denied")


# --- S3 listings: loops end, wrong shapes are named -------------------------------------------------------------


def _s3_pages(s3: S3Poser, page_of: dict[str, Answer]) -> None:
    s3.answer(rf"^/{S3Poser.BUCKET}/?\?", lambda seen: page_of[seen.query.get("continuation-token", "")])


def test_an_s3_listing_repeating_its_token_is_refused(s3: S3Poser, tmp_path: Path) -> None:
    first, second = ({key: s3.objects[key]} for key in ("data/a.txt", "data/b.txt"))  # as served: transfers may start
    _s3_pages(s3, {"": listing_page(first, "t1"), "t1": listing_page(second, "t1")})
    assert_failed(run_s3(s3, tmp_path), 1, f"at {s3.url}", "repeated the continuation token", "would never end")


def test_an_s3_listing_repeating_a_page_under_fresh_tokens_is_refused(s3: S3Poser, tmp_path: Path) -> None:
    s3.answer(
        rf"^/{S3Poser.BUCKET}/?\?",
        lambda seen: listing_page(
            {"data/a.txt": s3.objects["data/a.txt"]}, seen.query.get("continuation-token", "") + "x"
        ),
    )
    assert_failed(run_s3(s3, tmp_path), 1, f"at {s3.url}", "listed 'data/a.txt' .. 'data/a.txt' again", "never end")


def test_an_s3_listing_of_endless_empty_pages_is_refused(s3: S3Poser, tmp_path: Path) -> None:
    s3.answer(rf"^/{S3Poser.BUCKET}/?\?", lambda seen: listing_page({}, seen.query.get("continuation-token", "") + "x"))
    assert_failed(run_s3(s3, tmp_path), 1, "100 pages in a row listed nothing")
    assert len(s3.requests(r"\?")) <= 8 + 100  # the first chain of pages, then the first of the ranges


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>Welcome!</body></html>",
        b"not xml at all",
        b"<Error><Code>Nope</Code></Error>",
        b"<ListBucketResult><Contents><Size>5</Size></Contents></ListBucketResult>",
        b"<ListBucketResult><Contents><Key>k</Key><Size>big</Size></Contents></ListBucketResult>",
        b"<ListBucketResult><Contents><Key>k</Key><Size>-5</Size></Contents></ListBucketResult>",
        b"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
        b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    ],
    ids=["html", "text", "error-root", "no-key", "size-text", "size-negative", "no-size", "truncated-no-token"],
)
def test_an_s3_listing_of_the_wrong_shape_is_a_clear_failure(s3: S3Poser, tmp_path: Path, body: bytes) -> None:
    s3.answer(rf"^/{S3Poser.BUCKET}/?\?", Answer(body=body))
    assert_failed(run_s3(s3, tmp_path), 1, f"listing s3://bucket/ at {s3.url}: ")


def test_an_s3_key_outside_the_output_is_refused(s3: S3Poser, tmp_path: Path) -> None:
    s3.objects["data/../../escape.txt"] = b"evil"
    assert_failed(run_s3(s3, tmp_path / "run"), 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_an_s3_object_not_matching_its_etag_is_refused(s3: S3Poser, tmp_path: Path) -> None:
    s3.answer("/data/b.txt", Answer(headers={"ETag": '"' + "0" * 32 + '"'}, body=b"c" * 10))
    assert_failed(run_s3(s3, tmp_path), 1, "s3://bucket/data/b.txt")
    assert not (tmp_path / "out/data/b.txt").exists()


def test_an_s3_secret_echoed_in_an_error_never_reaches_the_output(s3: S3Poser, tmp_path: Path) -> None:
    """SigV4 never sends the secret key; a server still may quote the signature and the whole request back."""
    s3.answer(
        "/data/",
        lambda seen: Answer(
            400,
            body=f"<Error><Code>InvalidRequest</Code><Message>{json.dumps(SECRET_KEY)} {quote(SECRET_KEY)}"
            f" {SECRET_KEY[:9]}...</Message></Error>".encode(),
        ),
    )
    result = run_s3(s3, tmp_path, ANONYMOUS="false", ACCESS_KEY_ID="AKIDHOSTILE", SECRET_ACCESS_KEY=SECRET_KEY)
    assert_failed(result, 1, "S3 answered 400 InvalidRequest", "***")
    assert_secret_hidden(result, SECRET_KEY)


def test_a_session_token_that_cannot_be_sent_is_refused_at_once(s3: S3Poser, tmp_path: Path) -> None:
    """AWS_* variables reach the requests through botocore's chain, not the contract: the request itself refuses."""
    session_token = "IQoJb3JpZ2luX2VjE" + "\nX-Injected: yes"
    result = run_s3(
        s3,
        tmp_path,
        ANONYMOUS="false",
        AWS_ACCESS_KEY_ID="AKIDHOSTILE",
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_SESSION_TOKEN=session_token,
    )
    assert_failed(result, 1, "x-amz-security-token header holds a control character")
    assert "X-Injected" not in result.stdout + result.stderr
    assert_secret_hidden(result, SECRET_KEY)
    assert s3.seen == []


def test_a_hub_api_call_that_never_answers_is_timed_out(hub: HubPoser, tmp_path: Path) -> None:
    stalled = threading.Event()

    def never(_seen: Seen) -> None:
        stalled.wait(30)  # until the test ends: the program must give up first

    hub.answer("/revision/", never)
    try:
        assert_failed(run_hub(hub, tmp_path, READ_TIMEOUT="1"), 1, "cannot list hf://", "after 5 attempts")
    finally:
        stalled.set()


@pytest.mark.parametrize("what", ["/revision/", "/resolve/"])
def test_a_redirect_to_another_origin_is_followed_without_the_token(hub: HubPoser, tmp_path: Path, what: str) -> None:
    with HubPoser(FILES) as other:  # the same repo, elsewhere
        hub.answer(what, lambda seen: Answer(307, {"Location": other.url + seen.target}))
        result = run_hub(hub, tmp_path, ACCESS_TOKEN=TOKEN)
        assert result.code == 0, result.stderr[-2000:]
        assert other.requests(what) and all("authorization" not in seen.headers for seen in other.seen)
