"""One set of behaviours run against every store of the composition root (`initializers.sources.STORES`), each
against its real server, as rclone's fstests runs one suite against every backend. Each store is a
`devkit.conformance.Store`, found by its scheme (`devkit.conformance.fixtures`); a case that does not apply to a store
is skipped naming the capability it lacks. Every run is the dataset program (the model program's default selection
would pick files).

Runs are bound by events (the relays' counts, the program's log lines); timeouts only guard against a hang.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import pytest
from test_reliability import finish, wait_until

from devkit import read_faults
from devkit.conformance import TOKEN_PATH, Store, fixtures, manifest_entries
from devkit.malformed import CASES
from devkit.programs import ProgramResult, run_program, run_until_the_deadline_catches, start_program
from devkit.read_faults import LISTING, Faults, ReadFault, faults_for
from devkit.relay import EchoFault, Relay, ResetFault, StallFault, StatusFault
from devkit.samples import ODD_NAMES
from initializers.destination.manifest import MADE_FROM_VERSION, SIZE_AND_VERSION

#: Only catches a hang: the runs take seconds.
HANG_CEILING_SECONDS = 120.0
#: Bigger than two 8 MiB ranges, so fetched in three.
BIG = os.urandom(20 * 1024 * 1024 + 777)
BIG_PATH = "weights/big.bin"  # `.bin`: an LFS file on the Hub, as weights are
TARGET = "weights/target.bin"  # the file faults are aimed at
SMALL = {f"small/{i}.json": f'{{"i": {i}}}\n'.encode() * (i + 1) for i in range(4)}
FILES = {**SMALL, TARGET: os.urandom(256 * 1024)}
#: Body bytes of everything but the slowed file, at most (small files, listings, the table's metadata): more than
#: that past the relay means the slowed file's bytes are arriving.
OTHERS_CEILING = 512 * 1024


def known_finding(request: pytest.FixtureRequest, case: str, store: Store) -> None:
    """Expect the case to fail for `store` when the suite has a finding about it (`Store.findings`)."""
    if finding := store.findings.get(case):
        request.applymarker(pytest.mark.xfail(reason=f"{store.scheme}: {finding}", strict=True))


def _schemes() -> list[str]:
    """Every store's scheme, in the composition root's order."""
    from initializers.sources import STORES

    return [plugin.scheme for plugin in STORES]


#: Every store's conformance stores, by the suite's id for each (a scheme, or a variant's own id).
FIXTURES = {name: store for scheme in _schemes() for name, store in fixtures(scheme).items()}


def test_every_store_has_a_conformance_store():
    missing = [scheme for scheme in _schemes() if not fixtures(scheme)]
    assert not missing, f"stores without a conformance module devkit/conformance/<scheme>.py: {missing}"


@pytest.mark.parametrize("store_class", FIXTURES.values(), ids=FIXTURES.keys())
def test_a_store_is_held_to_what_the_source_its_scheme_opens_declares(store_class: type[Store]):
    """The capabilities a case goes by are those of the class the scheme's plug-in opens, not a copy in the suite."""
    from initializers.sources import STORES

    (plug_in,) = [plugin.open.__module__ for plugin in STORES if plugin.scheme == store_class.scheme]  # its face
    assert store_class.source.__module__.startswith(f"{plug_in}."), (store_class.source, plug_in)


@pytest.fixture(params=FIXTURES)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    yield from FIXTURES[request.param].serve(request, tmp_path_factory.mktemp("store"))


def fetch(store: Store, output: Path, **extra: str) -> ProgramResult:
    return run_program(store.kind, {**store.env(output), **extra}, timeout=HANG_CEILING_SECONDS)


def requires(store: Store, capability: str, why: str) -> None:
    """Skip the case for a store without `capability` (one of its flags), saying so."""
    if not getattr(store, capability):
        pytest.skip(f"{store.scheme}: lacks the capability `{capability}`: {why}")


def held(store: Store, files: dict[str, bytes], about: str) -> dict[str, bytes]:
    """`files`, or for a store whose URI names one file (`lists` False) the one of them the case is about."""
    return files if store.lists else {about: files[about]}


def ok(result: ProgramResult) -> None:
    assert result.code == 0, result.stdout + result.stderr
    assert result.last["event"] == "done", result.last


def final_paths(output: Path) -> set[str]:
    """The files at their final paths under `output` (its state folder aside), whatever they hold."""
    found = (p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file())
    return {path for path in found if not path.startswith(".initializer/")}


def completed(output: Path) -> bool:
    return (output / ".initializer" / "manifest.json").exists()


def requested(relay: Relay, match: str) -> int:
    """GETs of the bytes `match` names that reached the relay."""
    return sum(1 for method, path in relay.traffic.requests if method == "GET" and match in path)


def slowed_mid_file(store: Store, path: str, bytes_per_second: int) -> tuple[Relay, str]:
    """Slow the bodies of `path` to `bytes_per_second` per response; returns its relay and match."""
    relay, match = store.relay_for(path)
    relay.slow_paths, relay.bytes_per_second = match, bytes_per_second
    return relay, match


def wait_mid_file(store: Store, relay: Relay, match: str) -> None:
    """Until the slowed file is asked for and its bytes are crossing the relay."""
    wait_until(lambda: requested(relay, match) > 0 and store.body_bytes() > OTHERS_CEILING, timeout=60)


# -- 1. names -------------------------------------------------------------------------------------------------------


def test_nested_and_odd_names_land_at_their_paths(store: Store, tmp_path: Path):
    requires(store, "lists", "its URI names one file, landing under its name")
    store.put(ODD_NAMES)
    result = fetch(store, tmp_path / "out")
    ok(result)
    assert store.landed(tmp_path / "out") == ODD_NAMES


# -- 2. a large file in ranges --------------------------------------------------------------------------------------


def test_a_large_file_arrives_whole_in_ranges(store: Store, tmp_path: Path):
    requires(store, "ranged", "its files are not fetched in ranges by the engine (the cache's pyarrow reads them)")
    files = held(store, {BIG_PATH: BIG, **SMALL}, BIG_PATH)
    store.put(files)
    result = fetch(store, tmp_path / "out")
    ok(result)
    assert store.landed(tmp_path / "out") == files
    if store.relayed:  # its ranges are counted on the wire
        relay, match = store.relay_for(BIG_PATH)
        assert requested(relay, match) >= 3, relay.traffic.requests  # three 8 MiB ranges at least
    (entry,) = [e for e in manifest_entries(tmp_path / "out") if e["size"] == len(BIG)]
    assert entry["size"] == len(BIG) and ("checksum" in entry) == store.verifies_content, entry


# -- 3. a version changed mid-run -----------------------------------------------------------------------------------


def test_a_version_changed_mid_run_is_never_mixed(store: Store, tmp_path: Path):
    """One version, or a failure naming the file; the re-run brings the new version."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    old, new = held(store, {**SMALL, BIG_PATH: BIG}, BIG_PATH), held(store, {**SMALL, BIG_PATH: BIG[::-1]}, BIG_PATH)
    store.put(old)
    output = tmp_path / "out"
    relay, match = slowed_mid_file(store, BIG_PATH, 8 << 20)
    process = start_program(store.kind, {**store.env(output), "MAX_WORKERS": "1"})
    try:
        wait_mid_file(store, relay, match)
        store.change(BIG_PATH, new[BIG_PATH])
        result = finish(process, timeout=HANG_CEILING_SECONDS)
    finally:
        process.kill()
    landed = store.landed(output)
    if store.pinned_versions:
        ok(result)
        assert landed == old, "the version the run began with"
    elif result.code == 0:
        assert landed in (old, new)
    else:
        assert result.code == 1 and BIG_PATH in result.last["error"], result.last
        assert "changed" in result.last["error"] and not completed(output)
        assert landed.get(BIG_PATH) in (None, old[BIG_PATH], new[BIG_PATH])
    store.reset()
    ok(fetch(store, output))
    assert store.landed(output) == new


# -- 4. a byte flipped in transit -----------------------------------------------------------------------------------


def test_a_byte_flipped_in_transit_is_caught(request: pytest.FixtureRequest, store: Store, tmp_path: Path):
    """Fetched again (the file ends correct) or exit 1, never a wrong file at its path; for a store that makes its
    files, every file it made holds the bytes an unbroken read makes (a second run, without the fault)."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    known_finding(request, "flip", store)
    files = held(store, FILES, TARGET)
    store.put(files)
    relay, match = store.relay_for(TARGET)
    flip = relay.add_fault(store.flip_fault(match))
    result = fetch(store, tmp_path / "out")
    assert flip.hits == 1
    landed = store.landed(tmp_path / "out")
    if result.code == 0:
        assert landed == files, "a flipped byte landed"
        if store.makes_files:
            store.reset()
            ok(fetch(store, tmp_path / "clean"))
            assert Store.landed(store, tmp_path / "out") == Store.landed(store, tmp_path / "clean")
    else:
        assert result.code == 1 and TARGET in result.last["error"], result.stderr
        assert landed.get(TARGET) in (None, FILES[TARGET]) and not completed(tmp_path / "out")


# -- 5. a transient error, then success -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", None], ids=["get", "any"])
def test_a_transient_error_then_success(request: pytest.FixtureRequest, store: Store, tmp_path: Path, method: str):
    """Server errors and a reset on the requests for a file's bytes, fewer than the attempts a request gets (5): to
    its GETs, two 500s and a reset mid-body; to any of them (HEADs too), three 500s in a row."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    if method is None:
        known_finding(request, "transient-any", store)
    files = held(store, FILES, TARGET)
    store.put(files)
    relay, match = store.relay_for(TARGET)
    error = relay.add_fault(store.error_fault(match, times=2 if method else 3, method=method))
    reset = relay.add_fault(ResetFault(match=match, method="GET", after_bytes=1000, times=1)) if method else None
    result = fetch(store, tmp_path / "out")
    ok(result)
    assert error.hits == error.times and (reset is None or reset.hits == 1)
    assert store.landed(tmp_path / "out") == files


# -- 6. a throttled answer ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", None], ids=["get", "any"])
def test_a_throttled_answer_is_waited_out(request: pytest.FixtureRequest, store: Store, tmp_path: Path, method: str):
    """Three throttled answers in a row to the requests for a file's bytes (its GETs, or any of them: HEADs too)."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    if method is None:
        known_finding(request, "throttle-any", store)
    files = held(store, FILES, TARGET)
    store.put(files)
    relay, match = store.relay_for(TARGET)
    throttled = relay.add_fault(store.throttle_fault(match, times=3, method=method))
    result = fetch(store, tmp_path / "out")
    ok(result)
    assert throttled.hits == 3
    assert store.landed(tmp_path / "out") == files


# -- 7. a stop mid-file, then the re-run ----------------------------------------------------------------------------


def test_a_stop_mid_file_then_the_rerun_fetches_only_what_is_missing(store: Store, tmp_path: Path):
    """SIGTERM once the small files landed and the large one's bytes are crossing: exit 1, `stopped by SIGTERM`, the
    journal kept (the plan index, made anew by each run, gone); the re-run completes, fetching neither the files that
    landed nor (for a file store) a byte of them."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    files = held(store, {**SMALL, BIG_PATH: BIG}, BIG_PATH)
    store.put(files)
    output = tmp_path / "out"
    relay, match = slowed_mid_file(store, BIG_PATH, 2 << 20)
    process = start_program(store.kind, store.env(output))
    try:
        wait_mid_file(store, relay, match)
        if len(files) > 1:
            wait_until(lambda: any(final_paths(output)))
        process.send_signal(signal.SIGTERM)
        stopped = finish(process, timeout=HANG_CEILING_SECONDS)
    finally:
        process.kill()
    assert stopped.code == 1 and stopped.last["error"].startswith("stopped by SIGTERM while waiting for"), stopped.last
    assert not completed(output)
    state = output / ".initializer"
    assert not (state / "index.sqlite").exists(), "made anew by each run"
    if len(files) > 1:  # one file landed at least: the journal says so (a run that landed none leaves none)
        assert (state / "journal.jsonl").exists(), "kept: what a re-run needs"
    done = final_paths(output)
    assert BIG_PATH not in done, "stopped mid-file"
    store.reset()
    again = fetch(store, output)
    ok(again)
    assert store.landed(output) == files
    assert again.last["fetched_files"] == again.last["files"] - len(done), (done, again.last)
    if not store.makes_files:
        for path in done:
            assert requested(*store.relay_for(path)) == 0, f"{path} was done, and fetched again"


# -- 8. selection ---------------------------------------------------------------------------------------------------


SELECTABLE = {"keep/a.txt": b"a", "keep/b.json": b"{}", "drop/c.txt": b"c", "x.log": b"log"}


def test_selection_applies(store: Store, tmp_path: Path):
    requires(store, "lists", "its URI names one file, selected by its name alone")
    store.put(SELECTABLE)
    if not store.selection:
        for variable, pattern in (("IGNORE_PATTERNS", "*.log"), ("ALLOW_PATTERNS", "keep/*")):
            refused = fetch(store, tmp_path / "out", **{variable: pattern})
            assert refused.code == 2, refused.stdout + refused.stderr
            assert f"{variable} does not apply to {store.scheme}:// sources" in refused.last["error"]
        assert not (tmp_path / "out").exists()
        return
    result = fetch(store, tmp_path / "out", ALLOW_PATTERNS="keep/*,x.log", IGNORE_PATTERNS="*.json,*.log")
    ok(result)
    assert store.landed(tmp_path / "out") == {"keep/a.txt": b"a"}


# -- 9. the manifest ------------------------------------------------------------------------------------------------


def test_the_manifest_lists_every_file_with_its_size_and_check(store: Store, tmp_path: Path):
    """Every file on disk, and only those, with its size, version and the checksum it was verified against (or
    `"verified": "size+version"` where the source vouches for none, `"made from version"` for a file it makes)."""
    store.put(held(store, FILES, TARGET))
    output = tmp_path / "out"
    ok(fetch(store, output))
    entries = manifest_entries(output)
    assert {e["path"]: e["size"] for e in entries} == {
        path: (output / path).stat().st_size for path in final_paths(output)
    }
    for entry in entries:
        assert entry["version"], entry
        if store.verifies_content:  # against a checksum of a kind the source declares
            assert entry["checksum"]["algorithm"] in store.source.checksum_kinds and entry["checksum"]["hexdigest"], (
                entry
            )
        else:
            unchecked = MADE_FROM_VERSION if store.makes_files else SIZE_AND_VERSION
            assert "checksum" in entry or entry.get("verified") == unchecked, entry


# -- 10. a run that landed nothing leaves nothing -------------------------------------------------------------------


#: A refusal no client retries: 403, with S3's error body (Azure's has the same shape; the others read the status).
REFUSED = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>refused</Message></Error>'


@pytest.mark.parametrize("ending", ["stop", "timeout", "failure"])
def test_a_run_ended_before_the_listing_answers_leaves_output_path_as_found(store: Store, tmp_path: Path, ending: str):
    """A stop (SIGTERM, once the stalled listing request reached the relay), a TIMEOUT or a failure (the listing
    refused, 403) while its first page has not come: exit 1, and OUTPUT_PATH as it was: an empty folder still
    empty (a stop, a failure), an absent one still absent (a TIMEOUT), with no `.initializer/` nor plan index."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    store.put(SMALL)
    relay, match = store.listing()
    output = tmp_path / "out"
    if ending != "timeout":
        output.mkdir()
    if ending == "failure":
        refused = relay.add_fault(StatusFault(status=403, body=REFUSED, match=match, times=None))
        result = fetch(store, output)
        assert refused.hits >= 1
    else:
        stall = relay.add_fault(StallFault(match=match, before_headers=True, times=None, seconds=HANG_CEILING_SECONDS))
        if ending == "timeout":

            def run(deadline: int) -> ProgramResult:
                result = fetch(store, output, TIMEOUT=str(deadline))
                assert not output.exists(), sorted(output.rglob("*"))
                return result

            result = run_until_the_deadline_catches("the listing of", 5, run)
        else:
            process = start_program(store.kind, store.env(output))
            try:
                wait_until(lambda: stall.hits > 0, timeout=60)
                process.send_signal(signal.SIGTERM)
                result = finish(process, timeout=HANG_CEILING_SECONDS)
            finally:
                process.kill()
            assert "stopped by SIGTERM while waiting for the listing of" in result.last["error"], result.last
        assert stall.hits >= 1
    assert result.code == 1 and "Traceback" not in result.stderr, result.stdout + result.stderr
    if ending != "timeout":
        assert list(output.iterdir()) == []


# -- 11. secrets: a server that quotes every request back ----------------------------------------------------------

#: Where the echo is aimed: every request to the store (the credentials each carries), or only those for a file's
#: bytes (after the listing went through); and the status it comes with. Cloud Storage's token endpoint (the signed
#: assertion it is sent) is aimed at too, in its own case.
ECHOES = [("every request", 401), ("every request", 500), ("a file's bytes", 404)]


def _pieces(secret: str) -> set[str]:
    """Every form of `secret` the output must not hold: itself, URL-encoded, JSON-escaped (twice), and each run of
    12 of its characters that mixes two of lower case, upper case and digits (as random text does)."""
    once = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}
    forms = once | {json.dumps(form)[1:-1] for form in once}
    runs = {secret[i : i + 12] for i in range(len(secret) - 11)}
    mixed = {
        run for run in runs if sum(any(test(c) for c in run) for test in (str.islower, str.isupper, str.isdigit)) > 1
    }
    return forms | mixed


def _sent_credentials(fault: EchoFault) -> list[str]:
    """The credentials among what the program sent (and the server quoted back): bearer tokens, and form fields and
    query parameters that carry one (an OAuth assertion, a SAS signature)."""
    found = []
    for _method, target, headers, body in fault.echoed:
        for name, value in headers.items():
            if name.lower() in ("authorization", "proxy-authorization") and value.startswith(("Bearer ", "Basic ")):
                found.append(value.partition(" ")[2])
        fields = [*parse_qsl(urlsplit(target).query), *parse_qsl(body.decode("latin-1"))]
        found += [value for name, value in fields if name in ("assertion", "client_assertion", "sig", "subject_token")]
    return found


@pytest.mark.parametrize(("aim", "status"), ECHOES, ids=[f"{aim}-{status}" for aim, status in ECHOES])
def test_a_server_quoting_each_request_back_never_makes_a_secret_show(
    store: Store, tmp_path: Path, aim: str, status: int
):
    """No secret the run was given or sent, in any form, reaches stdout, stderr, the termination message or
    `.initializer/`, whatever the server quotes back (in every field of its error): the run fails, exit 1."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    store.put(held(store, FILES, TARGET))
    relay, match = store.relay_for(TARGET) if aim == "a file's bytes" else (store.relays[0], None)
    if (tokens := store.token_fault()) is not None:
        store.relays[0].add_fault(tokens)  # answered first; the echo takes the others
    _assert_no_secret_shows(store, tmp_path, relay.add_fault(store.echo_fault(status, match)))


@pytest.mark.parametrize("store", [name for name, store in FIXTURES.items() if store.token_endpoint], indirect=True)
def test_a_token_endpoint_quoting_the_assertion_back_never_makes_it_show(store: Store, tmp_path: Path):
    """The signed assertion a library sends for a token (google-auth's, and the key it is signed with), quoted back
    by the token endpoint."""
    store.put(FILES)
    _assert_no_secret_shows(store, tmp_path, store.relays[0].add_fault(store.echo_fault(400, TOKEN_PATH)))


def _assert_no_secret_shows(store: Store, tmp_path: Path, fault: EchoFault) -> None:
    """A run with credentials that travel (`credentialed_env`) fails, exit 1, after `fault` quoted requests back,
    and none of its secrets, nor any credential it sent, shows in any form."""
    output, keys = tmp_path / "out", tmp_path / "keys"
    keys.mkdir()
    env, secrets = store.credentialed_env(output, keys)
    termination = tmp_path / "termination-log"
    termination.write_text("")
    result = run_program(store.kind, {**env, "INITIALIZERS_TERMINATION_LOG": str(termination)},
                         timeout=HANG_CEILING_SECONDS)  # fmt: skip
    assert result.code == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert fault.echoed, "the server quoted nothing back"
    said = [result.stdout, result.stderr, termination.read_text()]
    said += [path.read_bytes().decode("latin-1") for path in (output / ".initializer").rglob("*") if path.is_file()]
    for secret in [*secrets, *_sent_credentials(fault)]:
        for form in _pieces(secret):
            assert not any(form in text for text in said), f"{form!r} (of {secret[:4]}...) leaked"


# -- 12. answers the store's documentation does not promise ---------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_an_answer_no_store_promises_fails_naming_the_server(store: Store, tmp_path: Path, case: str):
    """A listing (or one object's head) of the wrong shape, an entry of the wrong type or without a name, a size
    beyond 2^63 - 1 or below 0, a key outside the prefix, a page token that is none (`devkit.malformed`): exit 1 naming
    the server and what is wrong, nothing landed, never an internal error."""
    requires(store, "relayed", "no relay can stand between the program and its server")
    answers = store.malformed_answers()
    if case not in answers:
        why = "its answers cannot carry it" if answers else "pyiceberg reads its listing, in ranges"
        pytest.skip(f"{store.scheme}: no case {case!r}: {why}")
    answer = answers[case]
    store.put(FILES)
    answer.relay.add_fault(answer.fault())
    output = tmp_path / "out"
    result = fetch(store, output, **({"STORAGE_URI": answer.uri} if answer.uri else {}))
    assert result.code == 1, result.stdout + result.stderr
    error = result.last["error"]
    assert "internal error" not in error and "Traceback" not in result.stdout + result.stderr, error
    assert answer.relay.endpoint in error and answer.says in error, error
    assert not completed(output) and not final_paths(output), result.stderr


# -- 13. objects named like folders ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 17], ids=["empty", "with-bytes"])
def test_an_object_named_like_a_folder_is_skipped_when_empty_and_refused_otherwise(
    store: Store, tmp_path: Path, size: int
):
    """An empty one is the placeholder a console makes for a folder: skipped, and counted among the files ignored. One
    with bytes in it can land as no file: exit 1 naming it, as a name clash is, and no manifest. Files are fetched as
    the listing streams in, so the one listed before it may have landed whole, or not yet: either is right."""
    requires(store, "folder_names", "it cannot hold an object named like a folder")
    store.put({"trail/a.txt": b"a"})
    store.put_folder_named("trail/dir/", b"x" * size)
    output = tmp_path / "out"
    result = fetch(store, output)
    if size:
        assert result.code == 1, result.stdout + result.stderr
        assert "trail/dir/" in result.last["error"] and f"holds {size} bytes" in result.last["error"], result.last
        assert not completed(output) and store.landed(output) in ({}, {"trail/a.txt": b"a"})
        return
    ok(result)
    assert store.landed(output) == {"trail/a.txt": b"a"}
    (listed,) = result.named("listed")
    assert listed["ignored"] == 1, listed


# -- 14. faults in the store's own reads ----------------------------------------------------------------------------
# The faults the relay injects on the wire (cases 4 to 7 and 10), injected where every store meets the engine: the
# sink a range is read into, and the listing (`devkit.read_faults`). A store with no server a relay can stand in
# front of is checked by these too.


def read_faults_for(store: Store, folder: Path, *faults: ReadFault) -> Faults:
    """`faults` for a run against `store`, their hits recorded in a new folder under `folder`; a fault in a file's
    reads applies to a store whose reads the engine drives (a Storage)."""
    if any(fault.match != LISTING for fault in faults):
        requires(store, "ranged", "its reads are its library's (the cache's pyarrow), which the engine never drives")
    return faults_for(store.source, list(faults), Path(tempfile.mkdtemp(dir=folder)))


def fetch_with(faults: Faults, store: Store, output: Path) -> ProgramResult:
    return read_faults.run_program(faults, store.kind, store.env(output), timeout=HANG_CEILING_SECONDS)


def test_reads_cut_mid_body_are_resumed(store: Store, tmp_path: Path):
    """Two cuts 1000 bytes into the target's read, and one 5 MiB into a range of the large file: the store reads on
    from where each broke (or from the start), and every file lands whole, with no checksum mismatch on the way (a
    store resuming from the wrong byte is caught by its checksum, and the file fetched again, which hid it)."""
    files = held(store, {**FILES, BIG_PATH: BIG}, BIG_PATH)
    store.put(files)
    cuts = (ReadFault("cut", TARGET, times=2, after_bytes=1000), ReadFault("cut", BIG_PATH, after_bytes=5 << 20))
    cuts = tuple(cut for cut in cuts if cut.match in files)
    faults = read_faults_for(store, tmp_path, *cuts)
    result = fetch_with(faults, store, tmp_path / "out")
    ok(result)
    assert "checksum mismatch" not in result.stderr, result.stderr
    assert faults.hit_counts() == [cut.times for cut in cuts]
    assert store.landed(tmp_path / "out") == files


def test_reads_throttled_are_waited_out(store: Store, tmp_path: Path):
    """Three reads of the target refused as throttled (retry after 0.3 s) before their first byte."""
    files = held(store, FILES, TARGET)
    store.put(files)
    faults = read_faults_for(store, tmp_path, ReadFault("throttle", TARGET, times=3))
    ok(fetch_with(faults, store, tmp_path / "out"))
    assert faults.hit_counts() == [3]
    assert store.landed(tmp_path / "out") == files


def test_a_byte_flipped_in_a_read_is_caught(store: Store, tmp_path: Path):
    """Fetched again (the file ends correct) or exit 1 naming it, never a wrong file at its path."""
    requires(store, "verifies_content", "a byte flipped past its reads' own checks meets no checksum it vouches for")
    files = held(store, FILES, TARGET)
    store.put(files)
    faults = read_faults_for(store, tmp_path, ReadFault("flip", TARGET))
    result = fetch_with(faults, store, tmp_path / "out")
    assert faults.hit_counts() == [1]
    landed = store.landed(tmp_path / "out")
    if result.code == 0:
        assert landed == files, "a flipped byte landed"
    else:
        assert result.code == 1 and TARGET in result.last["error"], result.stderr
        assert landed.get(TARGET) in (None, FILES[TARGET]) and not completed(tmp_path / "out")


def test_a_stop_while_a_read_stalls_then_the_rerun_reads_only_what_is_missing(store: Store, tmp_path: Path):
    """SIGTERM once the small files landed and a range of the large file stalls before its first byte: exit 1,
    `stopped by SIGTERM`; the re-run completes, reading none of the files that landed."""
    files = held(store, {**SMALL, BIG_PATH: BIG}, BIG_PATH)
    store.put(files)
    output = tmp_path / "out"
    faults = read_faults_for(store, tmp_path, ReadFault("stall", BIG_PATH))
    process = read_faults.start_program(faults, store.kind, store.env(output))
    try:
        wait_until(lambda: faults.hit_counts() == [1] and final_paths(output) >= set(files) - {BIG_PATH}, timeout=60)
        process.send_signal(signal.SIGTERM)
        stopped = finish(process, timeout=HANG_CEILING_SECONDS)
    finally:
        process.kill()
    assert stopped.code == 1 and stopped.last["error"].startswith("stopped by SIGTERM while waiting for"), stopped.last
    done = final_paths(output)
    assert BIG_PATH not in done and not completed(output)
    counted = read_faults_for(store, tmp_path)  # no fault: the reads are counted
    again = fetch_with(counted, store, output)
    ok(again)
    assert store.landed(output) == files
    assert again.last["fetched_files"] == again.last["files"] - len(done), (done, again.last)
    assert not done & set(counted.reads()), "a file done was read again"


@pytest.mark.parametrize("ending", ["stop", "failure"])
def test_a_run_ended_before_the_listing_reads_leaves_output_path_as_found(store: Store, tmp_path: Path, ending: str):
    """A stop (SIGTERM, once the listing stalls before its first entry) or a failure (the listing refused): exit 1,
    and OUTPUT_PATH an empty folder still empty."""
    store.put(SMALL)
    output = tmp_path / "out"
    output.mkdir()
    faults = read_faults_for(store, tmp_path, ReadFault("refuse" if ending == "failure" else "stall", LISTING))
    if ending == "failure":
        result = fetch_with(faults, store, output)
    else:
        process = read_faults.start_program(faults, store.kind, store.env(output))
        try:
            wait_until(lambda: faults.hit_counts() == [1], timeout=60)
            process.send_signal(signal.SIGTERM)
            result = finish(process, timeout=HANG_CEILING_SECONDS)
        finally:
            process.kill()
        assert "stopped by SIGTERM while waiting for the listing of" in result.last["error"], result.last
    assert faults.hit_counts() == [1]
    assert result.code == 1 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert list(output.iterdir()) == []
