"""What a run fetches: the model default on real Hub layouts, ALLOW_PATTERNS with IGNORE_PATTERNS, and DRY_RUN, against
our Hub server and SeaweedFS; the rules themselves as pure logic."""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.programs import ProgramResult, run_program
from devkit.seaweed import SeaweedFS
from initializers.common.errors import ConfigError
from initializers.common.logs import get_logger
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.config.contract import Config
from initializers.kubeflow import sdk
from initializers.plan.selection import Selection
from initializers.sources import DATASET, MODEL

KUBEFLOW_DEFAULT = "*.msgpack,*.h5,*.bin,*.pt,*.pth"  # what the Kubeflow SDK sends when ignore_patterns is left alone
WEIGHTS = os.urandom(300_000)

#: sentence-transformers/all-MiniLM-L6-v2's layout: one model in five formats, ONNX and OpenVINO folders beside.
SENTENCE_TRANSFORMERS = {
    "1_Pooling/config.json": b"{}", "README.md": b"# card", ".gitattributes": b"*.bin lfs", "config.json": b"{}",
    "config_sentence_transformers.json": b"{}", "modules.json": b"[]", "sentence_bert_config.json": b"{}",
    "special_tokens_map.json": b"{}", "tokenizer.json": b"{}", "tokenizer_config.json": b"{}", "vocab.txt": b"a\nb",
    "train_script.py": b"print()", "model.safetensors": WEIGHTS, "pytorch_model.bin": WEIGHTS[:290_000],
    "tf_model.h5": WEIGHTS[:280_000], "rust_model.ot": WEIGHTS[:270_000], "flax_model.msgpack": WEIGHTS[:260_000],
    "onnx/model.onnx": WEIGHTS[:250_000], "onnx/model_O4.onnx": WEIGHTS[:240_000],
    "onnx/model_qint8_avx512.onnx": WEIGHTS[:70_000], "openvino/openvino_model.xml": b"<xml/>",
    "openvino/openvino_model.bin": WEIGHTS[:230_000],
}  # fmt: skip
SENTENCE_TRANSFORMERS_LOADED = {
    "1_Pooling/config.json", "config.json", "config_sentence_transformers.json", "modules.json",
    "sentence_bert_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    "train_script.py", "model.safetensors",
}  # fmt: skip
#: meta-llama/Llama-3.2-1B's: transformers' safetensors, and Meta's own checkpoint under original/.
LLAMA = {
    "config.json": b"{}", "generation_config.json": b"{}", "model.safetensors": WEIGHTS, "LICENSE.txt": b"license",
    "USE_POLICY.md": b"policy", "README.md": b"# card", "special_tokens_map.json": b"{}", "tokenizer.json": b"{}",
    "tokenizer_config.json": b"{}", "original/consolidated.00.pth": WEIGHTS[:290_000], "original/params.json": b"{}",
    "original/tokenizer.model": b"spm" * 100,
}  # fmt: skip
LLAMA_LOADED = {"config.json", "generation_config.json", "model.safetensors", "LICENSE.txt", "special_tokens_map.json",
                "tokenizer.json", "tokenizer_config.json"}  # fmt: skip
#: Qwen/Qwen2.5-0.5B-Instruct-GGUF's: one file per quantisation, nothing else but the card and the licence.
GGUF = {"LICENSE": b"license", "README.md": b"# card", "qwen2.5-0.5b-instruct-q4_k_m.gguf": WEIGHTS[:100_000],
        "qwen2.5-0.5b-instruct-q8_0.gguf": WEIGHTS[:200_000]}  # fmt: skip
#: microsoft/phi-2's (before transformers took it in): remote code beside sharded safetensors.
REMOTE_CODE = {
    "config.json": b"{}", "configuration_phi.py": b"class C: ...", "modeling_phi.py": b"class M: ...",
    "model-00001-of-00002.safetensors": WEIGHTS[:150_000], "model-00002-of-00002.safetensors": WEIGHTS[150_000:],
    "model.safetensors.index.json": b"{}", "tokenizer.json": b"{}", "vocab.json": b"{}", "merges.txt": b"a b",
    "added_tokens.json": b"{}", "generation_config.json": b"{}", "README.md": b"# card", "SECURITY.md": b"report",
}  # fmt: skip
REMOTE_CODE_LOADED = set(REMOTE_CODE) - {"README.md", "SECURITY.md"}


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo("st/minilm", SENTENCE_TRANSFORMERS)
        server.add_repo("meta/llama", LLAMA)
        server.add_repo("qwen/gguf", GGUF)
        server.add_repo("ms/phi", REMOTE_CODE)
        yield server


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".initializer" not in p.parts}  # fmt: skip


def fetch(hub: HubServer, repo: str, output: Path, **extra: str) -> ProgramResult:
    env = {"STORAGE_URI": f"hf://{repo}", "OUTPUT_PATH": str(output), "HF_ENDPOINT": hub.endpoint, **extra}
    return run_program("model", env)


def skipped_bytes(result: ProgramResult) -> int:
    (skipped,) = result.named("skipped")
    return skipped["bytes"]


@pytest.mark.parametrize(
    ("repo", "layout", "loaded"),
    [("st/minilm", SENTENCE_TRANSFORMERS, SENTENCE_TRANSFORMERS_LOADED), ("meta/llama", LLAMA, LLAMA_LOADED),
     ("ms/phi", REMOTE_CODE, REMOTE_CODE_LOADED)],
)  # fmt: skip
@pytest.mark.parametrize("ignore", [None, KUBEFLOW_DEFAULT])
def test_the_model_default_fetches_what_a_trainer_loads(
    hub: HubServer, tmp_path: Path, repo: str, layout: dict[str, bytes], loaded: set[str], ignore: str | None
):
    result = fetch(hub, repo, tmp_path / "m", **({} if ignore is None else {"IGNORE_PATTERNS": ignore}))
    assert result.code == 0, result.stderr
    assert files(tmp_path / "m") == {path: layout[path] for path in loaded}
    assert skipped_bytes(result) == sum(len(body) for path, body in layout.items() if path not in loaded)
    manifest = json.loads((tmp_path / "m" / ".initializer" / "manifest.json").read_text())
    assert manifest["allow_patterns"] == list(MODEL.default_allow) and "onnx/" in manifest["ignore_patterns"]


def test_a_gguf_only_repo_keeps_its_gguf_files_and_an_allow_list_picks_one(hub: HubServer, tmp_path: Path):
    every = fetch(hub, "qwen/gguf", tmp_path / "all")
    assert every.code == 0, every.stderr
    assert set(files(tmp_path / "all")) == {p for p in GGUF if p.endswith(".gguf")}
    assert every.named("keeping GGUF weights")
    one = fetch(hub, "qwen/gguf", tmp_path / "one", ALLOW_PATTERNS="*q4_k_m.gguf")
    assert one.code == 0, one.stderr
    assert set(files(tmp_path / "one")) == {"qwen2.5-0.5b-instruct-q4_k_m.gguf"}


def test_allow_patterns_replace_the_defaults_allow_list_and_its_ignore_side_stays(hub: HubServer, tmp_path: Path):
    """No safetensors among the allowed files: the .bin weights are the format kept; openvino/'s .bin is a copy."""
    result = fetch(hub, "st/minilm", tmp_path / "m", ALLOW_PATTERNS="*.bin,modules.json")
    assert result.code == 0, result.stderr
    assert set(files(tmp_path / "m")) == {"pytorch_model.bin", "modules.json"}


def test_allow_and_an_explicit_ignore_list_mean_exactly_those_lists(hub: HubServer, tmp_path: Path):
    result = fetch(hub, "st/minilm", tmp_path / "m", ALLOW_PATTERNS="onnx/,*.json", IGNORE_PATTERNS="*qint8*,*/*")
    assert result.code == 0, result.stderr
    assert set(files(tmp_path / "m")) == {p for p in SENTENCE_TRANSFORMERS if p.endswith(".json") and "/" not in p}
    onnx = fetch(hub, "st/minilm", tmp_path / "onnx", ALLOW_PATTERNS="onnx/", IGNORE_PATTERNS="*qint8*")
    assert onnx.code == 0, onnx.stderr
    assert set(files(tmp_path / "onnx")) == {"onnx/model.onnx", "onnx/model_O4.onnx"}
    everything = fetch(hub, "st/minilm", tmp_path / "all", IGNORE_PATTERNS="")
    assert files(tmp_path / "all") == SENTENCE_TRANSFORMERS and not everything.named("skipped")


def test_nothing_allowed_is_an_error_naming_the_rules(hub: HubServer, tmp_path: Path):
    result = fetch(hub, "st/minilm", tmp_path / "m", ALLOW_PATTERNS="*.nemo")
    assert result.code == 1
    rules = "ALLOW_PATTERNS '*.nemo' and the model default's ignore list 'onnx/,"
    assert f"all {len(SENTENCE_TRANSFORMERS)} files are excluded by {rules}" in result.last["error"]
    assert not (tmp_path / "m").exists() or not files(tmp_path / "m")


def test_the_model_default_on_s3(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    for path, body in SENTENCE_TRANSFORMERS.items():
        s3.put_object(Bucket=bucket, Key=f"models/minilm/{path}", Body=body)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/models/minilm", "OUTPUT_PATH": str(tmp_path / "m")}
    result = run_program("model", env)
    assert result.code == 0, result.stderr
    assert set(files(tmp_path / "m")) == SENTENCE_TRANSFORMERS_LOADED
    allowed = run_program("model", {**env, "OUTPUT_PATH": str(tmp_path / "a"), "ALLOW_PATTERNS": "*.json,*.ot"})
    assert allowed.code == 0, allowed.stderr
    assert set(files(tmp_path / "a")) == {p for p in SENTENCE_TRANSFORMERS if p.endswith((".json", ".ot"))}


# The dry run.


def plan_lines(result: ProgramResult) -> tuple[dict[str, int], dict[str, int]]:
    """The plan's file lines, {path: size}, and its totals line, from the JSON lines on stdout (which holds nothing
    else)."""
    *per_file, totals = [json.loads(line) for line in result.stdout.splitlines()]
    return {e["path"]: e["size"] for e in per_file}, totals


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_dry_run_prints_the_plan_and_creates_nothing(hub: HubServer, tmp_path: Path):
    absent = tmp_path / "not" / "there"
    result = fetch(hub, "st/minilm", absent, DRY_RUN="true")
    assert result.code == 0, result.stderr
    planned, totals = plan_lines(result)
    assert planned == {path: len(SENTENCE_TRANSFORMERS[path]) for path in SENTENCE_TRANSFORMERS_LOADED}
    assert totals["total_files"] == len(planned) and totals["total_bytes"] == sum(planned.values())
    assert totals["skipped_bytes"] == skipped_bytes(result)
    assert not (tmp_path / "not").exists()


def test_a_dry_run_leaves_an_existing_output_path_as_it_was(hub: HubServer, tmp_path: Path):
    done = fetch(hub, "meta/llama", tmp_path / "m")
    assert done.code == 0, done.stderr
    (tmp_path / "m" / "mine.txt").write_text("the user's")
    before = snapshot(tmp_path / "m")
    env = {"STORAGE_URI": "hf://st/minilm", "OUTPUT_PATH": str(tmp_path / "m"), "HF_ENDPOINT": hub.endpoint}
    result = run_program("model", env, "--dry-run", "true", "--ignore-patterns", "")  # the generated options
    assert result.code == 0, result.stderr
    assert set(plan_lines(result)[0]) == set(SENTENCE_TRANSFORMERS)
    assert snapshot(tmp_path / "m") == before


def test_a_dry_run_of_a_split_plan_prints_this_shares_part(hub: HubServer, tmp_path: Path):
    shares = [fetch(hub, "ms/phi", tmp_path / "m", DRY_RUN="1", SHARD_COUNT="2", SHARD_INDEX=str(i)) for i in (0, 1)]
    parts = [set(plan_lines(share)[0]) for share in shares]
    assert parts[0] and parts[1] and not parts[0] & parts[1] and parts[0] | parts[1] == REMOTE_CODE_LOADED
    assert not (tmp_path / "m").exists()


# Bad values.


@pytest.mark.parametrize(
    ("env", "message"),
    [({"DRY_RUN": "maybe"}, "DRY_RUN: expected true or false, got 'maybe'"),
     ({"MAX_BANDWIDTH": "fast"}, "MAX_BANDWIDTH: expected bytes per second"),
     ({"MAX_BANDWIDTH": "0"}, "MAX_BANDWIDTH: expected bytes per second"),
     ({"MAX_BANDWIDTH": "10MB"}, "MAX_BANDWIDTH: expected bytes per second"),
     ({"ALLOW_PATTERNS": "/onnx/*"}, "ALLOW_PATTERNS: '/onnx/*' starts with '/'"),
     ({"STORAGE_URI": "cache://s/t", "ALLOW_PATTERNS": "*.parquet"}, "ALLOW_PATTERNS does not apply to cache://"),
     ({"STORAGE_URI": "cache://s/t", "MAX_BANDWIDTH": "1M"}, "MAX_BANDWIDTH does not apply to cache://")],
)  # fmt: skip
def test_bad_values_exit_2_naming_the_variable(tmp_path: Path, env: dict[str, str], message: str):
    result = run_program("dataset", {"STORAGE_URI": "s3://b", "OUTPUT_PATH": str(tmp_path / "out"), **env})
    assert result.code == 2, result.stderr
    assert message in result.last["error"]
    assert not (tmp_path / "out").exists()


# The rules, as pure logic.


def select(config: Config, names: list[str], kind: Any = MODEL) -> list[str]:
    listing = [RemoteFile(name, 10, "v", name) for name in names]
    return [file.path for file in Selection(config, kind, get_logger("test")).filter(listing)]


@pytest.mark.parametrize(
    ("names", "kept"),
    [(["a.gguf", "b.bin", "c.safetensors", "d.pt"], ["c.safetensors"]),
     (["a.gguf", "b.bin", "original/params.json", "d.pt"], ["b.bin", "original/params.json", "d.pt"]),
     (["a.gguf", "original/params.json"], ["a.gguf"]),
     (["config.json", "model.onnx", "openvino/w.bin", "x.mlpackage/Data/weight.bin"], ["config.json"]),
     (["chat_template.jinja", "spiece.model", "qwen.tiktoken", "source.spm", "README.md", "LICENSE"],
      ["chat_template.jinja", "spiece.model", "qwen.tiktoken", "source.spm"])],
)  # fmt: skip
def test_the_model_defaults_rules(names: list[str], kept: list[str]):
    assert select(Config(), names) == kept


def test_a_dataset_has_no_default_and_its_allow_list_is_as_given():
    names = ["a.parquet", "b.bin", "README.md", "x/y.parquet"]
    assert select(Config(), names, DATASET) == names
    assert select(Config(allow_patterns=("*.parquet",), ignore_patterns=("x/",)), names, DATASET) == ["a.parquet"]


@pytest.mark.parametrize(
    ("raw", "rate"), [("50M", 50 << 20), ("1G", 1 << 30), ("500k", 500 << 10), ("1.5M", 3 << 19), ("123", 123)]
)
def test_bandwidth_suffixes_are_binary_multiples(raw: str, rate: int):
    assert Config.from_env({"MAX_BANDWIDTH": raw}).max_bandwidth == rate


def test_the_selection_returns_what_it_listed_skipped_and_gave_up_once_the_listing_ends():
    names = ["config.json", "model.safetensors", "pytorch_model.bin", "original/consolidated.pth", "model.gguf"]
    stream = KeepsReturnValue(
        Selection(Config(), MODEL, get_logger("test")).filter(RemoteFile(n, 10, "v", n) for n in names)
    )
    assert [file.path for file in stream] == ["config.json", "model.safetensors"]
    selected = stream.value
    assert selected.listed == 5
    assert {rule: s.files for rule, s in selected.skipped.items()} == {"another weight format": 3}
    assert selected.skipped_totals() == (3, 30)
    assert {"*.bin", "*.pt", "*.pth", "original/", "*.gguf"} <= set(selected.ignored_patterns)
    assert set(MODEL.default_ignore) <= set(selected.ignored_patterns)


def test_a_stream_keeps_what_its_generator_returned_and_none_for_a_plain_iterator():
    def counted() -> Generator[int, None, str]:
        yield 1
        yield 2
        return "two"

    numbers = KeepsReturnValue(counted())
    assert list(numbers) == [1, 2] and numbers.value == "two"
    plain = KeepsReturnValue(iter([3]))
    assert list(plain) == [3] and plain.value is None


def test_the_sdk_builder_writes_allow_patterns_with_the_programs_schema():
    env = sdk.program_env(sdk.HuggingFaceModelInitializer("hf://o/n", allow_patterns=["*q4_k_m.gguf", "*.json"]))
    assert env["ALLOW_PATTERNS"] == "*q4_k_m.gguf,*.json" and env["IGNORE_PATTERNS"] == KUBEFLOW_DEFAULT
    assert Config.from_env(env).allow_patterns == ("*q4_k_m.gguf", "*.json")
    with pytest.raises(ConfigError, match="ALLOW_PATTERNS: pattern 'a,b' contains ','"):
        sdk.S3DatasetInitializer("s3://b", allow_patterns=["a,b"])
