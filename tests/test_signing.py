"""SIGNATURE: models signed in the test with `model_signing` (a key pair, a certificate chain) are fetched by the
model program from a real SeaweedFS and from our Hub server, and checked before the manifest is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.outputs import manifest
from devkit.programs import ProgramResult, run_program
from devkit.seaweed import SeaweedFS
from devkit.signing import SIGNATURE, Keys, certificate_chain, key_pair, signed_model

WEIGHTS = "model.safetensors"
MODEL = {
    "config.json": b'{"model_type": "bert"}',
    "tokenizer.json": b'{"version": "1.0"}',
    "sub/vocab.txt": b"[PAD]\n[UNK]\n",
    WEIGHTS: os.urandom(3 * 1024 * 1024 + 17),
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return key_pair(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return certificate_chain(tmp_path_factory.mktemp("chain"))


def signed(folder: Path, keys: Keys, **how: Any) -> dict[str, bytes]:
    return signed_model(folder, keys, MODEL, **how)


def upload(s3: Any, bucket: str, files: dict[str, bytes]) -> None:
    for key, body in files.items():
        s3.put_object(Bucket=bucket, Key=f"m/{key}", Body=body)


def fetch_s3(seaweed: SeaweedFS, bucket: str, output: Path, **extra: str) -> ProgramResult:
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m", "OUTPUT_PATH": str(output), **extra}
    return run_program("model", env)


def loadable(output: Path) -> list[str]:
    """Files at final paths, outside the initializer's own folder."""
    return sorted(
        p.relative_to(output).as_posix()
        for p in output.rglob("*")
        if p.is_file() and not p.relative_to(output).as_posix().startswith(".initializer/")
    )


def test_a_model_signed_with_a_key_verifies_from_s3(
    seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path
):
    upload(s3, bucket, signed(tmp_path / "publisher", keys))
    result = fetch_s3(seaweed, bucket, tmp_path / "out", SIGNATURE="enforce", SIGNATURE_PUBLIC_KEY=str(keys.public))
    assert result.code == 0, result.stdout + result.stderr
    assert loadable(tmp_path / "out") == sorted([*MODEL, SIGNATURE])
    record = manifest(tmp_path / "out")["signature"]
    assert record["verdict"] == "verified" and record["mode"] == "enforce" and record["method"] == "key"
    assert record["signer"].startswith("key sha256:") and record["path"] == SIGNATURE
    assert result.named("signature verified")
    again = fetch_s3(seaweed, bucket, tmp_path / "out", SIGNATURE="enforce", SIGNATURE_PUBLIC_KEY=str(keys.public))
    assert again.code == 0 and again.last["fetched_files"] == 0, "a re-run fetches nothing and checks again"
    assert again.named("signature verified") and manifest(tmp_path / "out")["signature"] == record


def test_a_model_signed_with_a_certificate_chain_verifies_from_the_hub(chain: Keys, tmp_path: Path):
    files = signed(tmp_path / "publisher", chain)
    home = tmp_path / "home-is-a-file"
    home.touch()
    with HubServer() as hub:
        hub.add_repo("org/signed", files)
        env = {"STORAGE_URI": "hf://org/signed", "OUTPUT_PATH": str(tmp_path / "out"), "HF_ENDPOINT": hub.endpoint}
        result = run_program(
            "model",
            {**env, "HOME": str(home), "SIGNATURE": "enforce", "SIGNATURE_CERTIFICATE_CHAIN": str(chain.chain)},
        )
    assert result.code == 0, result.stdout + result.stderr
    recorded = manifest(tmp_path / "out")
    assert recorded["signature"]["verdict"] == "verified"
    assert recorded["signature"]["signer"] == "certificate CN=publisher signing"
    by_path = {entry["path"]: entry for entry in recorded["files"]}
    assert by_path[WEIGHTS]["checksum"]["algorithm"] == "sha256"  # the Hub's LFS digest: compared without a re-read


def _flip_one_byte(files: dict[str, bytes]) -> dict[str, bytes]:
    weights = bytearray(files[WEIGHTS])
    weights[len(weights) // 2] ^= 0x01
    return {**files, WEIGHTS: bytes(weights)}


#: What a bucket holds once someone tampered with a signed model, and the reason the run must give.
TAMPERED = {
    "one flipped byte": (_flip_one_byte, f"digest mismatch: {WEIGHTS} is not the file the publisher signed"),
    "a file added": (lambda files: {**files, "extra.json": b"{}"}, "file added: extra.json is not in the signature"),
    "a file removed": (
        lambda files: {path: body for path, body in files.items() if path != "tokenizer.json"},
        "file missing: tokenizer.json is signed but not in the source",
    ),
    "unsigned": (
        lambda files: {path: body for path, body in files.items() if path != SIGNATURE},
        f"the model is unsigned: the source has no {SIGNATURE}",
    ),
    "a signature that is not JSON": (lambda files: {**files, SIGNATURE: b"not json\n"}, "signature file is not JSON"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_enforce_fails_naming_the_reason_and_leaves_nothing_to_load(
    seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path, case: str
):
    tamper, reason = TAMPERED[case]
    upload(s3, bucket, tamper(signed(tmp_path / "publisher", keys)))
    output = tmp_path / "out"
    result = fetch_s3(seaweed, bucket, output, SIGNATURE="enforce", SIGNATURE_PUBLIC_KEY=str(keys.public))
    assert result.code == 1, result.stdout + result.stderr
    assert reason in result.last["error"] and result.last["error"].startswith("SIGNATURE=enforce: ")
    assert not (output / ".initializer" / "manifest.json").exists()
    assert loadable(output) == []
    rerun = fetch_s3(seaweed, bucket, output, SIGNATURE="enforce", SIGNATURE_PUBLIC_KEY=str(keys.public))
    assert rerun.code == 1 and reason in rerun.last["error"], "a re-run finds nothing it may keep"


def test_enforce_with_the_wrong_key_fails(seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path):
    upload(s3, bucket, signed(tmp_path / "publisher", keys))
    other = key_pair(tmp_path / "other")
    output = tmp_path / "out"
    result = fetch_s3(seaweed, bucket, output, SIGNATURE="enforce", SIGNATURE_PUBLIC_KEY=str(other.public))
    assert result.code == 1, result.stdout + result.stderr
    assert "the signature does not verify against SIGNATURE_PUBLIC_KEY" in result.last["error"]
    assert not (output / ".initializer" / "manifest.json").exists() and loadable(output) == []


def test_a_model_that_verified_once_and_was_tampered_with_since_is_taken_back(
    seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path
):
    """A complete download, re-run after the bucket changed: the earlier manifest is withdrawn and its files go."""
    files = signed(tmp_path / "publisher", keys)
    upload(s3, bucket, files)
    output = tmp_path / "out"
    trust = {"SIGNATURE": "enforce", "SIGNATURE_PUBLIC_KEY": str(keys.public)}
    assert fetch_s3(seaweed, bucket, output, **trust).code == 0
    upload(s3, bucket, {"extra.json": b"{}"})
    result = fetch_s3(seaweed, bucket, output, **trust)
    assert result.code == 1 and "file added: extra.json" in result.last["error"]
    assert not (output / ".initializer" / "manifest.json").exists() and loadable(output) == []


def test_warn_completes_and_records_the_verdict(seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path):
    upload(s3, bucket, _flip_one_byte(signed(tmp_path / "publisher", keys)))
    result = fetch_s3(seaweed, bucket, tmp_path / "out", SIGNATURE="warn", SIGNATURE_PUBLIC_KEY=str(keys.public))
    assert result.code == 0, result.stdout + result.stderr
    record = manifest(tmp_path / "out")["signature"]
    assert record["verdict"] == "failed" and record["mode"] == "warn"
    assert record["reason"] == f"digest mismatch: {WEIGHTS} is not the file the publisher signed"
    assert result.named("signature did not verify")[0]["level"] == "warning"
    assert loadable(tmp_path / "out") == sorted([*MODEL, SIGNATURE])


def test_off_records_nothing_and_never_imports_model_signing(
    seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path
):
    upload(s3, bucket, signed(tmp_path / "publisher", keys))
    result = fetch_s3(seaweed, bucket, tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert "signature" not in manifest(tmp_path / "out")
    code = (
        "import sys, initializers.run, initializers.model\n"
        "assert not [m for m in sys.modules if m.startswith(('model_signing', 'sigstore', 'OpenSSL'))]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_files_the_patterns_leave_out_are_reported_and_the_signature_file_is_always_fetched(
    seaweed: SeaweedFS, s3: Any, bucket: str, keys: Keys, tmp_path: Path
):
    upload(s3, bucket, signed(tmp_path / "publisher", keys))
    result = fetch_s3(
        seaweed,
        bucket,
        tmp_path / "out",
        ALLOW_PATTERNS="*.json",
        SIGNATURE="enforce",
        SIGNATURE_PUBLIC_KEY=str(keys.public),
    )
    assert result.code == 0, result.stdout + result.stderr
    assert loadable(tmp_path / "out") == sorted(["config.json", "tokenizer.json", SIGNATURE])
    record = manifest(tmp_path / "out")["signature"]
    assert record["verdict"] == "verified"
    assert record["not_fetched"] == {"files": 2, "first": [WEIGHTS, "sub/vocab.txt"]}


def test_a_sharded_signature_and_another_signature_path(
    seaweed: SeaweedFS, s3: Any, bucket: str, chain: Keys, tmp_path: Path
):
    """The signer hashed 1 MiB shards: each landed file is hashed by its shards; one flipped byte still fails."""
    files = signed(tmp_path / "publisher", chain, signature="sig/model.sig", shard_size=1 << 20)
    upload(s3, bucket, files)
    trust = {"SIGNATURE": "enforce", "SIGNATURE_PATH": "sig/model.sig", "SIGNATURE_CERTIFICATE_CHAIN": str(chain.chain)}
    good = fetch_s3(seaweed, bucket, tmp_path / "good", **trust)
    assert good.code == 0, good.stdout + good.stderr
    assert manifest(tmp_path / "good")["signature"]["verdict"] == "verified"
    upload(s3, bucket, {WEIGHTS: _flip_one_byte(files)[WEIGHTS]})
    bad = fetch_s3(seaweed, bucket, tmp_path / "bad", **trust)
    assert bad.code == 1 and f"digest mismatch: {WEIGHTS}" in bad.last["error"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "needs exactly one of SIGNATURE_PUBLIC_KEY and SIGNATURE_CERTIFICATE_CHAIN"),
        ({"SIGNATURE_PUBLIC_KEY": "/nonexistent/key.pub"}, "SIGNATURE_PUBLIC_KEY: '/nonexistent/key.pub' is not"),
        ({"SIGNATURE_PUBLIC_KEY": "KEY", "SIGNATURE_PATH": "../model.sig"}, "SIGNATURE_PATH: '../model.sig' must be"),
        ({"SIGNATURE": "strict"}, "SIGNATURE: expected one of off, warn, enforce"),
    ],
)
def test_bad_signature_settings_exit_2_naming_the_variable(
    seaweed: SeaweedFS, bucket: str, keys: Keys, tmp_path: Path, extra: dict[str, str], message: str
):
    given = {"SIGNATURE": "enforce", **extra}
    if given.get("SIGNATURE_PUBLIC_KEY") == "KEY":
        given["SIGNATURE_PUBLIC_KEY"] = str(keys.public)
    result = fetch_s3(seaweed, bucket, tmp_path / "out", **given)
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.last["error"]
    assert loadable(tmp_path / "out") == []


def test_the_cache_source_refuses_signature_settings():
    from initializers.common.errors import ConfigError
    from initializers.config.contract import Config
    from initializers.sources import DATASET
    from initializers.steps.signing import signing_for

    config = Config.from_env({"STORAGE_URI": "cache://schema/table", "SIGNATURE": "enforce"}, kind=DATASET)
    with pytest.raises(ConfigError, match=r"SIGNATURE does not apply to cache:// sources"):
        signing_for(config, DATASET)


def test_a_stop_is_taken_while_files_are_hashed_again(keys: Keys, tmp_path: Path):
    """The check is the run's last long step: a stop requested while it re-hashes a file ends it there."""
    from initializers.common.errors import Stopped
    from initializers.config.signing import SigningOptions
    from initializers.plan.signature import check

    files = signed(tmp_path, keys)
    options = SigningOptions("enforce", signature_public_key=str(keys.public))
    calls = []

    def stop_on_the_second_block() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise Stopped("stopped by SIGTERM while waiting for the publisher's signature to be checked")

    with pytest.raises(Stopped):
        check(options, tmp_path, [(path, None) for path in files], frozenset(), stop_on_the_second_block)
    assert check(options, tmp_path, [(path, None) for path in files], frozenset(), lambda: None).verified
