"""The programs' command line: options mirror the contract, exit codes 0/1/2, the last line says what happened."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devkit.hubserver import HubServer
from devkit.programs import run_program
from initializers import cli
from initializers.config.contract import Kind
from initializers.sources import DATASET, MODEL, STORES


def _accepted(kind: Kind) -> str:
    """The schemes the `kind` program accepts, as its messages list them."""
    return ", ".join(f"{scheme}://" for scheme in kind.schemes)


@pytest.mark.parametrize(
    ("kind", "env", "message"),
    [
        ("dataset", {}, "STORAGE_URI is not set"),
        ("model", {"STORAGE_URI": ""}, "STORAGE_URI is not set"),
        ("dataset", {"STORAGE_URI": "just-a-path"},
         f"is not a URI; the dataset-initializer accepts {_accepted(DATASET)}"),
        ("model", {"STORAGE_URI": "ftp://bucket/x"}, "scheme ftp:// is not supported by the model-initializer"),
        ("model", {"STORAGE_URI": "cache://schema/table"}, f"it accepts {_accepted(MODEL)}"),
        ("model", {"STORAGE_URI": "https://example.com/x?sig=s3cr3t#md5=1"}, "STORAGE_URI: "
         "'https://example.com/x?***#md5=1': its fragment pins no digest; expected #sha256= and 64 hex digits or "
         "#sha512= and 128"),
        ("dataset", {"STORAGE_URI": "s3://"}, "names no bucket"),
        ("model", {"STORAGE_URI": "hf://just-a-name"}, "Repository id must be 'namespace/name'"),
        ("dataset", {"STORAGE_URI": "hf://org/name@"}, "Empty revision after '@'"),
        ("dataset", {"STORAGE_URI": "https://huggingface.co/org/m"}, "names a model repository: the model-initializer"),
        ("model", {"STORAGE_URI": "hf://datasets/org/ds"}, "names a dataset repository: the dataset-initializer"),
        ("dataset", {"STORAGE_URI": "s3://b", "MAX_WORKERS": "lots"}, "MAX_WORKERS: expected an integer from 1 to 256"),
        ("dataset", {"STORAGE_URI": "s3://b", "ACCESS_KEY_ID": "id"}, "SECRET_ACCESS_KEY is not set"),
        ("dataset", {"STORAGE_URI": "s3://b", "ANONYMOUS": "true", "ACCESS_KEY_ID": "i",
                     "SECRET_ACCESS_KEY": "s-9f8e7d"}, "ANONYMOUS=true conflicts"),
        ("dataset", {"STORAGE_URI": "s3://b"}, "no S3 credentials found"),
        ("dataset", {"STORAGE_URI": "s3://b", "ENDPOINT": "minio:9000"},
         "ENDPOINT: expected an http:// or https:// URL"),
        ("dataset", {"STORAGE_URI": "s3://b", "MAX_WORKERS": "100000"},
         "MAX_WORKERS: expected an integer from 1 to 256"),
        ("dataset", {"STORAGE_URI": "cache://schema"}, "expected cache://SCHEMA/TABLE"),
        ("dataset", {"STORAGE_URI": "cache:///table"}, "expected cache://SCHEMA/TABLE"),
        ("dataset", {"STORAGE_URI": "cache://s/t/extra"}, "expected cache://SCHEMA/TABLE"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "NUM_DATA_NODES": "2"}, "METADATA_LOC is not set"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json"}, "NUM_DATA_NODES is not set"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json", "NUM_DATA_NODES": "1"},
         "NUM_DATA_NODES=1: the cache source needs at least 2 data nodes"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json", "CLUSTER_SIZE": "2"},
         "CLUSTER_SIZE=2: the cache source needs at least 2 data nodes, got 1"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json", "CLUSTER_SIZE": "4",
                     "NUM_DATA_NODES": "2"}, "CLUSTER_SIZE=4 means 3 data nodes, but NUM_DATA_NODES=2"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "gs://b/m.json", "NUM_DATA_NODES": "2"},
         "METADATA_LOC: scheme gs:// is not supported"),
        ("dataset", {"STORAGE_URI": "cache://s/t", "METADATA_LOC": "/m.json", "NUM_DATA_NODES": "2",
                     "IGNORE_PATTERNS": "*.parquet"}, "IGNORE_PATTERNS does not apply to cache://"),
    ],
)  # fmt: skip
def test_configuration_errors_exit_2_and_say_why(kind: str, env: dict[str, str], message: str, tmp_path: Path):
    result = run_program(kind, {"OUTPUT_PATH": str(tmp_path / "out"), "HOME": str(tmp_path), **env})
    assert result.code == 2, result.stdout + result.stderr
    assert result.last["event"] == "failed" and result.last["level"] == "error"
    assert message in result.last["error"]
    assert result.stdout == "", "logs and errors go to stderr"
    assert not (tmp_path / "out").exists(), "a configuration error must leave nothing behind"


@pytest.mark.parametrize("under", [False, True])
def test_an_output_path_that_is_or_is_under_a_file_is_bad_configuration(under: bool, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    output = blocker / "out" if under else blocker
    env = {"STORAGE_URI": "s3://b", "OUTPUT_PATH": str(output), "ACCESS_KEY_ID": "i",
           "SECRET_ACCESS_KEY": "s-1a2b3c", "ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 2, result.last
    where = f"is under '{blocker}', which is a file" if under else "is a file"
    assert result.last["error"] == f"OUTPUT_PATH '{output}' {where}, not a folder: name a folder (made if missing)"
    assert blocker.read_text() == "a file where a folder should be"


def test_the_other_program_into_a_folder_its_sibling_filled_is_refused_naming_both_programs(tmp_path: Path):
    output = tmp_path / "x"
    with HubServer() as hub:
        hub.add_repo("org/m", {"config.json": b"{}"})
        hub.add_repo("org/m", {"train.jsonl": b"{}\n"}, repo_type="dataset")
        env = {"STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(output), "HF_ENDPOINT": hub.endpoint}
        assert run_program("model", env).code == 0
        result = run_program("dataset", env)
    assert result.code == 2, result.last
    assert result.last["error"] == (
        f"OUTPUT_PATH '{output}' holds hf://org/m as fetched by the model-initializer (its manifest says so); the "
        "dataset-initializer would mix its files with those: choose another OUTPUT_PATH, or set REPLACE_EXISTING=true "
        "to replace those files with these"
    )
    assert sorted(path.name for path in output.iterdir()) == [".initializer", "config.json"]


def test_options_win_over_variables(tmp_path: Path):
    result = run_program("model", {"STORAGE_URI": "s3://b"}, "--storage-uri", "ftp://x")
    assert result.code == 2 and "ftp://" in result.last["error"]


def test_help_documents_every_variable_of_the_programs_own_sources_and_the_exit_codes():
    model, dataset = run_program("model", {}, "--help"), run_program("dataset", {}, "-h")
    assert model.code == dataset.code == 0
    for variable in ("STORAGE_URI", "OUTPUT_PATH", "IGNORE_PATTERNS", "ACCESS_TOKEN", "ENDPOINT", "ROLE_ARN",
                     "ANONYMOUS", "MAX_WORKERS", "LOG_FORMAT"):  # fmt: skip
        assert f"[{variable}]" in model.stdout and f"[{variable}]" in dataset.stdout
    for cache_only in ("METADATA_LOC", "CLUSTER_SIZE", "HEAD_CPU"):  # the model program has no cache:// source
        assert f"[{cache_only}]" not in model.stdout and f"[{cache_only}]" in dataset.stdout
    # Grouped by who reads them: the shared options first (with -h and --version), then each option group under the
    # program's stores that read it, in the order the stores declare their groups.
    for kind, text in ((MODEL, model.stdout), (DATASET, dataset.stdout)):
        readers = {group: [f"{p.scheme}://" for p in kind.plugins if group in p.options] for p in kind.plugins
                   for group in p.options}  # fmt: skip
        headings = ["Options", *dict.fromkeys(f"{', '.join(schemes)} sources" for schemes in readers.values())]
        assert re.findall(r"^(\S.*):$", text, re.M) == headings
        options = text.split("Options:")[1].split("sources:")[0]
        assert "[LOG_LEVEL]" in options and "-h, --help" in options and "[ENDPOINT]" not in options
        assert "[ENDPOINT]" in text.split("sources:", 1)[1]
    for text in (model.stdout, dataset.stdout):
        words = " ".join(text.split())
        assert "Exit codes: 0 done and verified, 1 the fetch failed, 2 bad configuration" in words
        assert "another tool's name for one: HF_HUB_TOKEN, ACCESS_KEY, SECRET_KEY)" in words
        assert "Variables only the other program's sources read are ignored, with a warning." in words
        assert "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL" in words and "HUGGING_FACE_HUB_TOKEN" in words
        assert (
            "Also read, without an option: HF_ENDPOINT," in words and "AWS_CA_BUNDLE" in words and "NO_PROXY" in words
        )


def test_each_programs_help_names_only_its_own_sources_folders_and_defaults():
    model, dataset = (" ".join(run_program(kind, {}, "--help").stdout.split()) for kind in ("model", "dataset"))
    # Each names its own sources (as they register their forms), folder and default selection ...
    for kind, text in ((MODEL, model), (DATASET, dataset)):
        *usages, last = [
            plugin.usage + "".join(f" (or {s}://)" for s in plugin.also_schemes) for plugin in kind.plugins
        ]
        assert f"Source: {', '.join(usages)} or {last}; or a" in text
    assert "Destination folder [default: /workspace/model]" in model
    assert "Destination folder [default: /workspace/dataset]" in dataset
    assert "the model default, what a trainer loads, in one weight format" in model
    assert (
        "are not fetched [default: none]" in dataset and "[default: every file]. Does not apply to cache://" in dataset
    )
    assert "For cache://, the one shard (of NUM_DATA_NODES) this node materialises" in dataset
    # ... and none of the other's.
    for other in ("cache://", "NUM_DATA_NODES", "/workspace/dataset", "dataset only", "dataset:"):
        assert other not in model, other
    for other in ("/workspace/model", "model:", "trainer", "weight format", "model default", "(hf, s3)"):
        assert other not in dataset, other


@pytest.mark.parametrize("kind", [MODEL, DATASET])
def test_the_sources_help_is_what_the_programs_own_sources_register(kind: Kind):
    text = " ".join(CliRunner().invoke(cli.build_command(kind), ["--help"]).output.split())
    assert {plugin.scheme for plugin in STORES} == set(DATASET.schemes) | set(MODEL.schemes)
    for plugin in STORES:
        assert (plugin.usage in text) == (plugin.scheme in kind.schemes), plugin.scheme
    assert f"[default: {kind.default_output_path}]. [OUTPUT_PATH]" in text


def test_true_or_false_options_work_as_bare_flags_and_with_a_value():
    bare = run_program("dataset", {}, "--dry-run")  # parsed, then the missing source is the error (not click's)
    assert bare.code == 2 and "STORAGE_URI is not set" in bare.last["error"]
    valued = run_program("dataset", {}, "--verify", "false", "--dry-run=maybe")  # a value is parsed as the variable's
    assert valued.code == 2 and "--dry-run: expected true or false, got 'maybe'" in valued.last["error"]


def test_a_command_appended_after_a_flag_is_dropped_as_after_any_option():
    flags = {"--dry-run"}
    assert cli._options_only(["--dry-run", "bash", "-c", "python -m x"], flags) == (["--dry-run"], [])
    assert cli._options_only(["--dry-run", "false", "bash"], flags) == (["--dry-run", "false"], [])
    assert cli._options_only(["--storage-uri", "hf://o/n", "bash"], flags) == (["--storage-uri", "hf://o/n"], [])
    assert cli._options_only(["/usr/bin/python3", "-m", "pkg.initializers.model"], flags) == ([], [])
    # Anything else is a word given by mistake, for the run to refuse.
    assert cli._options_only(["--dry-run", "hf://o/n", "./x"], flags) == (["--dry-run"], ["hf://o/n", "./x"])


def test_unknown_options_are_usage_errors():
    result = run_program("dataset", {}, "--no-such-option")
    assert result.code == 2 and "No such option" in result.stderr


def test_console_format_on_request(tmp_path: Path):
    result = run_program("dataset", {"LOG_FORMAT": "console", "OUTPUT_PATH": str(tmp_path)})
    assert result.code == 2 and result.stdout == ""
    assert "failed" in result.stderr and "STORAGE_URI is not set" in result.stderr and not result.stderr.startswith("{")


def test_console_scripts_are_installed():
    bindir = Path(sys.executable).parent
    for program in ("dataset-initializer", "model-initializer"):
        done = subprocess.run([bindir / program, "--version"], capture_output=True, text=True, check=True)
        assert done.stdout.strip()
