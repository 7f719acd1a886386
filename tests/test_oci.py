"""The oci:// store against a real registry (CNCF Distribution, `devkit/registry.py`) on loopback: artifacts land with
every blob verified, a tag pinned to its manifest's digest, credentials as container tools find them (basic auth from
a Docker config file, a registry's bearer challenge), plain HTTP only where OCI_PLAIN_HTTP says, and what is not read
yet (layers to unpack, images) refused clearly. The conformance suite (`tests/test_conformance.py -k oci`) runs the
behaviours every store shares."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.conformance import manifest_entries
from devkit.programs import ProgramResult, run_program
from devkit.registry import (
    OCI_EMPTY_CONFIG,
    OCI_MANIFEST,
    TITLE,
    Registry,
    TokenGate,
    digest_of,
    docker_config,
)
from devkit.relay import EchoFault, Relay, StatusFault

FILES = {"config.json": b'{"hidden": 8}', "weights/model.safetensors": os.urandom(300_000), "nested/a/b.txt": b"b"}
USER, PASSWORD = "puller", "Pw-9fK2xQ7mLr4Tz"


def repository() -> str:
    return f"models/m{uuid.uuid4().hex[:10]}"


def fetch(registry_host: str, repo: str, output: Path, reference: str = ":v1", **extra: str) -> ProgramResult:
    env = {
        "STORAGE_URI": f"oci://{registry_host}/{repo}{reference}",
        "OUTPUT_PATH": str(output),
        "OCI_PLAIN_HTTP": "true",
    }
    return run_program("dataset", {**env, **extra}, timeout=120)


def landed(output: Path) -> dict[str, bytes]:
    return {
        p.relative_to(output).as_posix(): p.read_bytes()
        for p in output.rglob("*")
        if p.is_file() and not p.relative_to(output).as_posix().startswith(".initializer/")
    }


def source_of(output: Path) -> dict[str, Any]:
    return json.loads((output / ".initializer" / "manifest.json").read_text())["source"]


def failed(result: ProgramResult, *said: str) -> str:
    """The run's error, once it failed with exit 1, never a traceback, saying each of `said`."""
    assert result.code == 1, result.stdout + result.stderr
    error = result.last["error"]
    assert "Traceback" not in result.stderr and "internal error" not in error, result.stderr
    for words in said:
        assert words in error, error
    return error


def test_an_artifacts_files_land_at_their_titles_each_verified_by_its_digest(registry: Registry, tmp_path: Path):
    repo = repository()
    digest = registry.push_artifact(repo, "v1", FILES)
    result = fetch(registry.host, repo, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == FILES
    for entry in manifest_entries(tmp_path / "out"):
        assert entry["checksum"] == {"algorithm": "sha256", "hexdigest": digest_of(FILES[entry["path"]])[7:]}, entry
    assert source_of(tmp_path / "out") == {
        "uri": f"oci://{registry.host}/{repo}:v1", "registry": registry.endpoint, "repository": repo, "tag": "v1",
        "digest": digest,
    }  # fmt: skip


def test_modelpack_raw_layers_land_at_their_filepaths(registry: Registry, tmp_path: Path):
    repo = repository()
    config = registry.push_blob(repo, b'{"descriptor": {}}')
    weights = os.urandom(1000)
    layer = {"mediaType": "application/vnd.cncf.model.weight.v1.raw", "digest": registry.push_blob(repo, weights),
             "size": len(weights), "annotations": {"org.cncf.model.filepath": "llm/model.safetensors"}}  # fmt: skip
    registry.push_manifest(repo, "v1", {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.cncf.model.manifest.v1+json",
        "config": {"mediaType": "application/vnd.cncf.model.config.v1+json", "digest": config, "size": 18},
        "layers": [layer],
    })  # fmt: skip
    result = fetch(registry.host, repo, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == {"llm/model.safetensors": weights}


def test_a_byte_flipped_in_the_registrys_storage_is_caught_and_nothing_lands(registry: Registry, tmp_path: Path):
    repo = repository()
    files = {"a.bin": os.urandom(50_000), "b.bin": os.urandom(50_000)}
    registry.push_artifact(repo, "v1", files)
    stored = registry.blob_file(digest_of(files["a.bin"]))
    data = bytearray(stored.read_bytes())
    data[1234] ^= 0xFF
    stored.write_bytes(bytes(data))
    output = tmp_path / "out"
    failed(fetch(registry.host, repo, output), "a.bin")
    assert "a.bin" not in landed(output) and not (output / ".initializer" / "manifest.json").exists()


@pytest.mark.parametrize("reference", [":v1", "@"], ids=["by-tag", "by-digest"])
def test_a_manifest_changed_in_the_registrys_storage_is_caught(registry: Registry, tmp_path: Path, reference: str):
    """Its bytes no longer those of its digest (a space become a tab: still JSON): exit 1, nothing fetched."""
    repo = repository()
    digest = registry.push_artifact(repo, "v1", {"a.bin": os.urandom(8)})  # its own manifest: others' stay whole
    stored = registry.blob_file(digest)
    stored.write_bytes(stored.read_bytes().replace(b" ", b"\t", 1))
    result = fetch(registry.host, repo, tmp_path / "out", reference=f"@{digest}" if reference == "@" else reference)
    failed(result, f"the manifest's digest is {digest_of(stored.read_bytes())}, not {digest}: checksum mismatch")
    assert not landed(tmp_path / "out")


def test_a_tag_is_pinned_to_the_digest_it_resolved_to(registry: Registry, tmp_path: Path):
    repo = repository()
    first = registry.push_artifact(repo, "v1", {"w.bin": b"one"})
    registry.push_artifact(repo, "v1", {"w.bin": b"two"})
    by_digest = fetch(registry.host, repo, tmp_path / "old", reference=f"@{first}")
    assert by_digest.code == 0, by_digest.stderr
    assert landed(tmp_path / "old") == {"w.bin": b"one"}
    assert source_of(tmp_path / "old")["digest"] == first and source_of(tmp_path / "old")["tag"] is None
    assert fetch(registry.host, repo, tmp_path / "new").code == 0
    assert landed(tmp_path / "new") == {"w.bin": b"two"} and source_of(tmp_path / "new")["digest"] != first


def test_an_index_gives_its_artifacts_manifest(registry: Registry, tmp_path: Path):
    """Of an index holding an image's manifest for linux/arm64 and an artifact's (no platform), the artifact's."""
    repo = repository()
    artifact = registry.push_artifact(repo, "artifact", {"w.bin": b"w"})
    image = registry.push_artifact(repo, "image", {"x.bin": b"x"})
    size = 2
    arm64 = {"os": "linux", "architecture": "arm64"}
    registry.push_manifest(repo, "v1", {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": image, "size": size, "platform": arm64},
            {"mediaType": OCI_MANIFEST, "digest": artifact, "size": size},
        ],
    })  # fmt: skip
    result = fetch(registry.host, repo, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == {"w.bin": b"w"}
    assert source_of(tmp_path / "out")["digest"] == artifact


@pytest.mark.parametrize(
    ("layer", "said"),
    [
        ({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "annotations": {TITLE: "dir",
          "io.deis.oras.content.unpack": "true"}}, "is an archive to unpack: unpacking layers is not supported yet"),
        ({"mediaType": "application/vnd.cncf.model.weight.v1.tar", "annotations": {"org.cncf.model.filepath": "w"}},
         "is an archive to unpack: unpacking layers is not supported yet"),
        ({"mediaType": "application/vnd.oci.image.layer.v1.tar"}, "has no org.opencontainers.image.title"),
    ],
    ids=["oras-folder", "modelpack-tar", "untitled"],
)  # fmt: skip
def test_a_layer_that_is_no_file_is_refused_naming_it(registry: Registry, tmp_path: Path, layer: dict, said: str):
    repo = repository()
    data = b"tar bytes"
    digest = registry.push_blob(repo, data)
    config = registry.push_blob(repo, b"{}")
    registry.push_manifest(repo, "v1", {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x",
        "config": {"mediaType": OCI_EMPTY_CONFIG, "digest": config, "size": 2},
        "layers": [{"digest": digest, "size": len(data), **layer}],
    })  # fmt: skip
    output = tmp_path / "out"
    failed(fetch(registry.host, repo, output), f"layer 1 ({digest}", said)
    assert not landed(output)


def test_an_image_is_refused_as_not_supported_yet(registry: Registry, tmp_path: Path):
    repo = repository()
    config = registry.push_blob(repo, b'{"architecture": "amd64", "os": "linux"}')
    registry.push_artifact(
        repo, "v1", {"models/m.bin": b"m"}, artifactType=None,
        config={"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 40},
    )  # fmt: skip
    failed(fetch(registry.host, repo, tmp_path / "out"), "is a container image", "not supported yet")


@pytest.mark.parametrize(("repo", "reference", "said"), [
    ("models/none", ":v1", "has no such repository or tag (404 MANIFEST_UNKNOWN"),
    (None, ":nope", "has no such repository or tag (404 MANIFEST_UNKNOWN"),
])  # fmt: skip
def test_an_unknown_repository_or_tag_names_the_reference(
    registry: Registry, tmp_path: Path, repo: str | None, reference: str, said: str
):
    if repo is None:
        repo = repository()
        registry.push_artifact(repo, "v1", {"a": b"a"})
    failed(fetch(registry.host, repo, tmp_path / "out", reference=reference), f"{repo}{reference}", said)


def test_a_manifest_of_an_unknown_kind_is_refused_naming_the_registry(registry: Registry, tmp_path: Path):
    """Docker's schema 1 (signed, long gone from registries), answered in the registry's place."""
    repo = repository()
    registry.push_artifact(repo, "v1", {"a": b"a"})
    schema1 = "application/vnd.docker.distribution.manifest.v1+prettyjws"
    body = json.dumps({"schemaVersion": 1, "mediaType": schema1, "fsLayers": []}).encode()
    with Relay(registry.endpoint) as relay:
        relay.add_fault(StatusFault(status=200, match="/manifests/v1", times=None, body=body, content_type=schema1))
        result = fetch(relay.endpoint.partition("://")[2], repo, tmp_path / "out")
    failed(result, relay.endpoint, f"a manifest of an unknown kind ('{schema1}')")


@pytest.fixture(scope="module")
def private_registry() -> Iterator[Registry]:
    with Registry.start(users={USER: PASSWORD}) as server:
        yield server


def test_basic_auth_from_a_docker_config_file(private_registry: Registry, tmp_path: Path):
    repo = repository()
    private_registry.push_artifact(repo, "v1", FILES)
    keys = tmp_path / "keys"
    keys.mkdir()
    docker_config(keys, private_registry.host, USER, PASSWORD)
    anonymous = fetch(private_registry.host, repo, tmp_path / "anonymous")
    failed(anonymous, "requires credentials it accepts (401 UNAUTHORIZED", "OCI_USERNAME")
    result = fetch(private_registry.host, repo, tmp_path / "out", DOCKER_CONFIG=str(keys))
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == FILES
    as_podman = fetch(private_registry.host, repo, tmp_path / "podman", REGISTRY_AUTH_FILE=str(keys / "config.json"))
    assert as_podman.code == 0, as_podman.stderr
    wrong = fetch(private_registry.host, repo, tmp_path / "wrong", OCI_USERNAME=USER, OCI_PASSWORD="not-it-4Kq9")
    failed(wrong, "requires credentials it accepts")
    for run in (result, as_podman, wrong):
        assert PASSWORD not in run.stdout + run.stderr and "not-it-4Kq9" not in run.stdout + run.stderr


@pytest.mark.parametrize("content", ['{"auths": []}', '{"auths": "x"}', "[]", "{not json"])
def test_a_docker_config_file_of_another_shape_is_refused_naming_its_variable(
    registry: Registry, tmp_path: Path, content: str
):
    repo = repository()
    registry.push_artifact(repo, "v1", FILES)
    (tmp_path / "config.json").write_text(content)
    result = fetch(registry.host, repo, tmp_path / "out", REGISTRY_AUTH_FILE=str(tmp_path / "config.json"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.last["error"].startswith("REGISTRY_AUTH_FILE: "), result.last
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


def test_the_bearer_challenge_is_met_with_a_token_never_shown(registry: Registry, tmp_path: Path):
    """A registry behind a token service (`TokenGate`): challenged, the store asks the realm for a token to pull the
    repository, once, and sends it on every request."""
    repo = repository()
    registry.push_artifact(repo, "v1", FILES)
    token = "eyJhbGciOiJSUzI1NiJ9.Tk9UQVJFQUxUT0tFTg.c2lnbmF0dXJlOTg3NjU0"
    with TokenGate(registry.endpoint, token) as gate:
        result = fetch(gate.host, repo, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == FILES
    assert gate.scopes == [f"repository:{repo}:pull"]
    assert token not in result.stdout + result.stderr


def test_a_token_refused_as_soon_as_issued_fails_the_run_after_one_request_for_it(registry: Registry, tmp_path: Path):
    repo = repository()
    registry.push_artifact(repo, "v1", {"a": b"a"})
    with TokenGate(registry.endpoint, "issued-but-useless-7Hq2", honoured=False) as gate:
        failed(fetch(gate.host, repo, tmp_path / "out"), "requires credentials it accepts (401 UNAUTHORIZED")
    assert gate.scopes == [f"repository:{repo}:pull"]


def test_plain_http_only_where_oci_plain_http_names_the_registry(registry: Registry, tmp_path: Path):
    """Unnamed, the registry is reached over HTTPS, which a plain HTTP server cannot answer: exit 1 naming it."""
    repo = repository()
    registry.push_artifact(repo, "v1", {"a": b"a"})
    for plain in ("", "false", "other.example:5000"):
        refused = fetch(registry.host, repo, tmp_path / f"out{plain}", OCI_PLAIN_HTTP=plain)
        failed(refused, f"{registry.host} does not answer over HTTPS", "name it in OCI_PLAIN_HTTP")
    named = fetch(registry.host, repo, tmp_path / "named", OCI_PLAIN_HTTP=f"other.example:5000,{registry.host}")
    assert named.code == 0, named.stderr


def test_a_blob_redirected_to_another_host_is_fetched_without_the_registrys_credentials(
    registry: Registry, tmp_path: Path
):
    repo = repository()
    registry.push_artifact(repo, "v1", FILES)
    keys = tmp_path / "keys"
    keys.mkdir()
    with Relay(registry.endpoint) as front, Relay(registry.endpoint) as storage:
        docker_config(keys, front.endpoint.partition("://")[2], USER, PASSWORD)
        blob = f"/v2/{repo}/blobs/{digest_of(FILES['weights/model.safetensors'])}"
        front.add_fault(StatusFault(status=307, match=blob, times=None, body=b"",
                                    headers={"Location": f"{storage.endpoint}{blob}?signed=1"}))  # fmt: skip
        result = fetch(front.endpoint.partition("://")[2], repo, tmp_path / "out", DOCKER_CONFIG=str(keys))
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == FILES
    assert any(path.startswith(blob) for _, path in storage.traffic.requests), storage.traffic.requests
    assert all("authorization" not in headers for headers in storage.traffic.headers)
    assert any("authorization" in headers for headers in front.traffic.headers)


NESTED = b"[" * 100_000  # JSON's parser recurses per bracket: a RecursionError, not a ValueError, unless caught


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (StatusFault(status=200, match="/manifests/v1", times=None, body=NESTED, content_type=OCI_MANIFEST),
         "reading the manifest of {uri} at {server}: the manifest is not JSON"),
        (StatusFault(status=400, match="/blobs/sha256:", times=None, body=NESTED, content_type="application/json"),
         "answered 400 Bad Request: [[[["),
        (StatusFault(status=307, match="/blobs/sha256:", times=None, body=b"", headers={"Location": "http://[::1/x"}),
         "redirected to 'http://[::1/x', which is no URL"),
        (StatusFault(status=401, match="/manifests/v1", times=None, body=b"{}", content_type="application/json",
                     headers={"WWW-Authenticate": 'Bearer realm="http://[::1/token"'}),
         "the registry's challenge names no token service (realm 'http://[::1/token')"),
    ],
    ids=["manifest-nested-deep", "error-nested-deep", "redirect-to-no-url", "realm-no-url"],
)  # fmt: skip
def test_a_hostile_answer_fails_the_run_naming_it(registry: Registry, tmp_path: Path, fault: StatusFault, said: str):
    """Answers no registry gives, in the registry's place: exit 1 saying what was wrong, never an internal error."""
    repo = repository()
    registry.push_artifact(repo, "v1", {"a.bin": b"a"})
    with Relay(registry.endpoint) as relay:
        relay.add_fault(fault)
        host = relay.endpoint.partition("://")[2]
        result = fetch(host, repo, tmp_path / "out")
    failed(result, said.format(uri=f"oci://{host}/{repo}:v1", server=relay.endpoint))
    assert not landed(tmp_path / "out")


def test_a_token_answer_nested_too_deep_is_no_token(registry: Registry, tmp_path: Path):
    repo = repository()
    registry.push_artifact(repo, "v1", {"a.bin": b"a"})
    with TokenGate(registry.endpoint, "never-issued-4Rt8", answer=NESTED) as gate:
        failed(
            fetch(gate.host, repo, tmp_path / "out"),
            f"the token service at {gate.endpoint} answered 200 without a token",
        )


def test_a_layer_titled_with_a_lone_surrogate_is_refused_naming_it(registry: Registry, tmp_path: Path):
    """JSON's `\\ud800` decodes to no character UTF-8 encodes: no file can take that name."""
    repo = repository()
    data = b"w"
    registry.push_artifact(repo, "v1", {"a.bin": data})
    registry.push_manifest(repo, "v1", {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x",
        "config": {"mediaType": OCI_EMPTY_CONFIG, "digest": registry.push_blob(repo, b"{}"), "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": digest_of(data), "size": 1,
                    "annotations": {TITLE: "w\ud800.bin"}}],
    })  # fmt: skip
    failed(fetch(registry.host, repo, tmp_path / "out"), "refusing source file 'w\\ud800.bin'", "lone surrogate")


def test_credentials_reach_a_token_service_in_clear_only_where_oci_plain_http_names_it(
    registry: Registry, tmp_path: Path
):
    """A registry (here the relay, named in OCI_PLAIN_HTTP) whose challenge names a realm over plain HTTP on another
    host: basic credentials are not sent there unless that host is named too; anonymous, the token is fetched."""
    repo = repository()
    registry.push_artifact(repo, "v1", {"a.bin": b"a"})
    credentials = {"OCI_USERNAME": USER, "OCI_PASSWORD": PASSWORD}
    with TokenGate(registry.endpoint, "tok-7Gh3kLp2") as gate, Relay(gate.endpoint) as relay:
        front = relay.endpoint.partition("://")[2]
        refused = fetch(front, repo, tmp_path / "refused", OCI_PLAIN_HTTP=front, **credentials)
        failed(refused, f"a token service over plain HTTP ({gate.endpoint})", f"name {gate.host} in OCI_PLAIN_HTTP")
        assert gate.scopes == [] and PASSWORD not in refused.stdout + refused.stderr
        anonymous = fetch(front, repo, tmp_path / "anonymous", OCI_PLAIN_HTTP=front)
        named = fetch(front, repo, tmp_path / "named", OCI_PLAIN_HTTP=f"{front},{gate.host}", **credentials)
    assert anonymous.code == 0, anonymous.stderr
    assert named.code == 0, named.stderr
    assert landed(tmp_path / "named") == {"a.bin": b"a"}


def test_a_bearer_challenge_among_others_with_unquoted_parameters_is_met(registry: Registry, tmp_path: Path):
    """`Basic realm="r", Bearer realm=URL,service=S` in one header, as RFC 7235 lets a registry write it and
    Distribution's clients read it: the bearer challenge is met."""
    repo = repository()
    registry.push_artifact(repo, "v1", FILES)
    with TokenGate(registry.endpoint, "tok-Qw8eRt5y") as gate, Relay(gate.endpoint) as relay:
        challenge = f'Basic realm="devkit", Bearer realm={gate.endpoint}/token,service=devkit'
        relay.add_fault(StatusFault(status=401, match="/manifests/v1", body=b"{}", content_type="application/json",
                                    headers={"WWW-Authenticate": challenge}))  # fmt: skip
        result = fetch(relay.endpoint.partition("://")[2], repo, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert landed(tmp_path / "out") == FILES
    assert gate.scopes == [f"repository:{repo}:pull"]


def test_a_registry_echoing_the_token_in_its_errors_never_shows_it(registry: Registry, tmp_path: Path):
    """The request quoted back in a distribution API error (JSON-escaped, URL-encoded, in headers too): the bearer
    token it carried is hidden wherever the error is logged."""
    repo = repository()
    registry.push_artifact(repo, "v1", FILES)
    token = "eyJhbGciOiJFUzI1NiJ9.RUNIT0VEVE9LRU4.c2lnbmF0dXJlMTIzNDU2"
    with TokenGate(registry.endpoint, token) as gate, Relay(gate.endpoint) as relay:
        echo = relay.add_fault(EchoFault(
            status=400, match="/blobs/sha256:", times=None,
            render=lambda said: json.dumps({"errors": [{"code": "BLOB_UNKNOWN", "message": said}]}).encode(),
        ))  # fmt: skip
        result = fetch(relay.endpoint.partition("://")[2], repo, tmp_path / "out")
    failed(result, "answered 400 BLOB_UNKNOWN: you sent: GET /v2/")
    assert any(headers.get("authorization") == f"Bearer {token}" for _, _, headers, _ in echo.echoed)
    assert token not in result.stdout + result.stderr and "RUNIT0VEVE9LRU4" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("titles", "said"),
    [
        (["../escape.bin"], "refusing source file '../escape.bin': a '..' segment would escape OUTPUT_PATH"),
        (["/etc/cron.d/x"], "refusing source file '/etc/cron.d/x': an absolute path would escape OUTPUT_PATH"),
        (["a\0b"], "its name contains a NUL byte"),
        (["same.bin", "same.bin"], "both map to 'same.bin'"),
        (["d", "d/e.bin"], "'d' would have to be both a file and a folder"),
    ],
    ids=["dotdot", "absolute", "nul", "duplicate", "file-and-folder"],
)
def test_layer_titles_that_would_escape_or_clash_are_refused(
    registry: Registry, tmp_path: Path, titles: list[str], said: str
):
    """Manifests pushed raw to Distribution, which stores any title: nothing lands outside OUTPUT_PATH, or over
    another file."""
    repo = repository()
    blobs = [os.urandom(16) for _ in titles]
    registry.push_manifest(repo, "v1", {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x",
        "config": {"mediaType": OCI_EMPTY_CONFIG, "digest": registry.push_blob(repo, b"{}"), "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": registry.push_blob(repo, data), "size": 16,
                    "annotations": {TITLE: title}} for title, data in zip(titles, blobs, strict=True)],
    })  # fmt: skip
    failed(fetch(registry.host, repo, tmp_path / "out"), said)
    assert not landed(tmp_path / "out") and not (tmp_path / "escape.bin").exists()
