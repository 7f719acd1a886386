"""A newcomer's mistakes are one clear sentence and exit 2, before anything is written: a misspelt variable, words
given as arguments; and the environment a cluster gives a pod is never taken for one."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.hubserver import HubServer
from devkit.programs import run_program
from initializers.config.contract import Config
from initializers.config.misspellings import misspelt
from initializers.sources import DATASET, MODEL

OURS = [name for _, setting in Config.settings(DATASET) for name in (setting.env, *setting.fallback_env)]

#: What a pod's environment holds besides ours: Kubernetes' service variables (for services named like our
#: variables, too), what images, GPUs, Kubeflow's trainer and the system set, and Kubeflow's cache-cluster siblings.
CLUSTER_ENV = {
    "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1",
    "OUTPUT_SERVICE_HOST": "10.0.0.7", "OUTPUT_SERVICE_PORT": "80", "OUTPUT_SERVICE_PORT_HTTP": "80",
    "OUTPUT_PORT": "tcp://10.0.0.7:80", "OUTPUT_PORT_80_TCP": "tcp://10.0.0.7:80", "OUTPUT_PORT_80_TCP_PROTO": "tcp",
    "REGION_PORT": "tcp://10.0.0.8:80", "STORAGE_SERVICE_HOST": "10.0.0.9", "STORAGE_PORT_9000_TCP_PORT": "9000",
    "HOSTNAME": "trainjob-node-0", "HOME": "/root", "TERM": "xterm", "VERSION": "1", "POD_NAME": "p",
    "POD_NAMESPACE": "ns", "NODE_NAME": "n", "HOST_IP": "10.1.0.1", "MASTER_ADDR": "m", "MASTER_PORT": "29500",
    "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "PET_NNODES": "2", "PET_NODE_RANK": "0", "JOB_NAME": "j",
    "NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VERSION": "12.4", "LD_LIBRARY_PATH": "/usr/lib", "DATASET_PATH": "/d",
    "MODEL_PATH": "/m", "MIN_WORKERS": "1", "HEAD_GPU": "1", "WORKER_GPU": "1", "TPU_NAME": "t", "GPG_KEY": "k",
    "REQUESTS_CA_BUNDLE": "/ca.pem", "HF_HUB_OFFLINE": "0", "AWS_PROFILE": "p", "PYTHONUNBUFFERED": "1",
}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("OUTPUT_PAHT", "OUTPUT_PATH"),  # two letters swapped
        ("STORAGE_URL", "STORAGE_URI"),  # one changed, in an abbreviation
        ("STORGE_URI", "STORAGE_URI"),  # one dropped
        ("IGNORE_PATTERN", "IGNORE_PATTERNS"),
        ("ACESS_TOKEN", "ACCESS_TOKEN"),
        ("SECRET_ACCES_KEY", "SECRET_ACCESS_KEY"),
        ("MAX_WORKER", "MAX_WORKERS"),
        ("REGOIN", "REGION"),
        ("REVISONS", "REVISION"),  # two slips in a long word
        ("DRY_RUNN", "DRY_RUN"),
        ("storage_uri", "STORAGE_URI"),  # ours, in the wrong case: Linux would never read it as ours
        ("Output_Path", "OUTPUT_PATH"),
        ("STORAGE_URl", "STORAGE_URI"),  # one letter in lower case: a slip (URL for URI) in the wrong case
        ("output_paht", "OUTPUT_PATH"),
        ("DRYRUN", "DRY_RUN"),  # a `_` missing ...
        ("OUTPUTPATH", "OUTPUT_PATH"),
        ("STORAGEURI", "STORAGE_URI"),
        ("dryrun", "DRY_RUN"),
        ("SECRETACCESS_KEY", "SECRET_ACCESS_KEY"),
        ("DRY__RUN", "DRY_RUN"),  # ... added ...
        ("_DRY_RUN", "DRY_RUN"),
        ("OUTPUT_PATH_", "OUTPUT_PATH"),
        ("MAX_WORK_ERS", "MAX_WORKERS"),  # ... or moved
    ],
)
def test_a_slip_of_the_keys_in_one_of_our_names_is_found(given: str, meant: str):
    assert misspelt([given], OURS) == {given: meant}


def test_a_clusters_variables_are_never_taken_for_misspellings():
    assert misspelt(CLUSTER_ENV, OURS) == {}
    # Nor names that differ from ours by more than a slip: they are someone else's; nor LOGLEVEL, torchrun's.
    assert misspelt(["OUTPT_PAHT", "OUTPUTPAHT", "output_path_x", "OUTPUT_PATH_X", "LOGLEVEL", "loglevel"], OURS) == {}
    # Nor the lower-case names other tools own, nor another tool's prefix in any case (hf_token is not HF_TOKEN's slip).
    others = ["http_proxy", "https_proxy", "all_proxy", "no_proxy", "hf_token", "aws_region", "Hf_Endpoint", "home"]
    assert misspelt(others, OURS) == {}


def test_no_two_of_our_names_differ_only_in_their_underscores():
    assert len({name.replace("_", "") for name in OURS}) == len(set(OURS))


@pytest.mark.parametrize(
    ("given", "meant"), [("DRYRUN", "DRY_RUN"), ("OUTPUTPATH", "OUTPUT_PATH"), ("DRY__RUN", "DRY_RUN")]
)
def test_a_missing_or_extra_underscore_is_refused_before_anything_is_fetched(given: str, meant: str, tmp_path: Path):
    """Unrefused, `DRYRUN=true` would run a real fetch where a dry run was asked for."""
    with HubServer() as hub:
        hub.add_repo("org/m", {"config.json": b"{}"})
        env = {"HF_ENDPOINT": hub.endpoint, "STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(tmp_path / "m")}
        result = run_program("model", {**env, given: str(tmp_path / "x") if "PATH" in given else "true"})
        asked = hub.requests
    assert result.code == 2, result.last
    assert result.last["error"] == f"{given} is not a variable these programs read; did you mean {meant}?"
    assert [event["event"] for event in result.events] == ["failed"]
    assert not (tmp_path / "m").exists() and not (tmp_path / "x").exists() and asked == []


def test_a_misspelt_variable_is_refused_naming_both(tmp_path: Path):
    output = tmp_path / "out"
    result = run_program("dataset", {"STORAGE_URI": "hf://org/ds", "OUTPUT_PAHT": str(output)})
    assert result.code == 2
    assert result.last["error"] == "OUTPUT_PAHT is not a variable these programs read; did you mean OUTPUT_PATH?"
    assert not output.exists()


@pytest.mark.parametrize(
    ("given", "meant"), [("storage_uri", "STORAGE_URI"), ("Output_Path", "OUTPUT_PATH"), ("STORAGE_URl", "STORAGE_URI")]
)
def test_one_of_our_variables_in_the_wrong_case_is_refused_before_anything_is_written(
    given: str, meant: str, tmp_path: Path
):
    """Unrefused, `Output_Path=/data` would fetch into the default folder: the run ends before it looks at either."""
    default = Path(MODEL.default_output_path)
    there = default.exists()
    result = run_program("model", {"STORAGE_URI": "hf://org/m", "HOME": str(tmp_path), given: str(tmp_path / "data")})
    assert result.code == 2, result.last
    assert result.last["error"] == f"{given} is not a variable these programs read; did you mean {meant}?"
    assert not (tmp_path / "data").exists() and default.exists() == there
    assert [event["event"] for event in result.events] == ["failed"]


def test_a_pod_environment_runs_as_it_is(tmp_path: Path):
    with HubServer() as hub:
        hub.add_repo("org/ds", {"train.jsonl": b"{}\n"}, repo_type="dataset")
        env = {**CLUSTER_ENV, "HF_ENDPOINT": hub.endpoint, "STORAGE_URI": "hf://org/ds", "OUTPUT_PATH": str(tmp_path)}
        # The proxies in lower case, as curl and requests read them (the hub's host bypasses the proxy).
        env |= {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": "127.0.0.1"}
        result = run_program("dataset", env)
    assert result.code == 0, result.last
    assert (tmp_path / "train.jsonl").read_bytes() == b"{}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["hf://org/name", "./x"],
            "the model-initializer takes no positional arguments (got hf://org/name ./x): set "
            "STORAGE_URI=hf://org/name OUTPUT_PATH=./x, or give --storage-uri hf://org/name --output-path ./x",
        ),
        (
            ["--dry-run", "s3://b/my data"],
            "the model-initializer takes no positional arguments (got 's3://b/my data'): set "
            "STORAGE_URI='s3://b/my data', or give --storage-uri 's3://b/my data'",
        ),
        (
            ["download", "org/name"],
            "the model-initializer takes no positional arguments (got download org/name): give the source as "
            "STORAGE_URI=... (or --storage-uri ...) and the destination as OUTPUT_PATH=... (or --output-path)",
        ),
    ],
)
def test_words_given_as_arguments_are_refused_with_the_form_to_use(args: list[str], message: str, tmp_path: Path):
    result = run_program("model", {"OUTPUT_PATH": str(tmp_path / "out")}, *args)
    assert result.code == 2 and result.last["error"] == message
    assert not (tmp_path / "out").exists()


def test_the_model_program_ignores_the_caches_variables_and_says_so(tmp_path: Path):
    """A pod's environment made for both programs (Kubeflow's cache settings among them) runs the model program: they
    apply to cache:// sources, which it does not take, so their values are never read, only named in a warning."""
    cache = {"NUM_DATA_NODES": "abc", "CACHE_READY_TIMEOUT_SECONDS": "1.5", "METADATA_LOC": "s3://b/m.json"}
    with HubServer() as hub:
        hub.add_repo("org/m", {"config.json": b"{}"})
        env = {**cache, "HF_ENDPOINT": hub.endpoint, "STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(tmp_path / "m")}
        model = run_program("model", env)
        dataset = run_program("dataset", {**env, "STORAGE_URI": "hf://datasets/org/d", "OUTPUT_PATH": str(tmp_path)})
    assert model.code == 0, model.last
    assert (tmp_path / "m" / "config.json").read_bytes() == b"{}"
    [ignored] = model.named("ignored")
    assert ignored["level"] == "warning" and sorted(ignored["variables"]) == sorted(cache)
    assert ignored["reason"] == "they apply to cache:// sources, not the model-initializer's"
    # The dataset program reads them, and refuses a bad value before anything else.
    assert dataset.code == 2 and dataset.last["error"] == "NUM_DATA_NODES: expected a positive integer, got 'abc'"


@pytest.mark.parametrize(
    ("given", "value", "meant"),
    [
        ("ACCESS_KEY", "AKIDHABIT7Q3Z", "ACCESS_KEY_ID"),  # MinIO's and s3cmd's names
        ("SECRET_KEY", "sk-habit-secret-9f8e7d6c", "SECRET_ACCESS_KEY"),
        ("secret_key", "sk-habit-secret-9f8e7d6c", "SECRET_ACCESS_KEY"),
        ("HF_HUB_TOKEN", "hf_habitTokenValue42xyz", "ACCESS_TOKEN or HF_TOKEN"),  # huggingface_hub reads no such name
    ],
)
def test_another_tools_name_set_by_habit_is_a_near_miss_whose_value_is_never_shown(
    given: str, value: str, meant: str, tmp_path: Path
):
    """Unrefused, each would be ignored: a private source fetched without its credentials, or refused for the lack of
    them with no word of the variable that was set."""
    termination = tmp_path / "termination-log"
    termination.write_text("")
    env = {
        "STORAGE_URI": "s3://b/m",
        "OUTPUT_PATH": str(tmp_path / "m"),
        "INITIALIZERS_TERMINATION_LOG": str(termination),
    }
    result = run_program("model", {**env, given: value})
    assert result.code == 2, result.last
    assert result.last["error"] == f"{given} is not a variable these programs read; did you mean {meant}?"
    assert termination.read_text() == f"failed (exit 2): {result.last['error']}"
    assert value not in result.stdout + result.stderr + termination.read_text()
    assert not (tmp_path / "m").exists()


def test_habits_are_near_misses_only_of_the_settings_a_program_reads():
    assert misspelt(["ACCESS_KEY", "HF_HUB_TOKEN"], ["ACCESS_KEY_ID"], {"ACCESS_KEY": "ACCESS_KEY_ID"}) == {
        "ACCESS_KEY": "ACCESS_KEY_ID"
    }
    assert misspelt(["ACCESS_KEY", "SECRET_KEY"], ["ACCESS_KEY_ID", "SECRET_ACCESS_KEY"]) == {}  # no habit given
