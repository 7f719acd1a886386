"""The SDK-side builder against the real Kubeflow SDK (0.5.0, installed from PyPI): same env, same or earlier errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub.constants import HF_URI_TYPE_PREFIXES
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from hypothesis import given
from hypothesis import strategies as st
from kubeflow.trainer.backends.container import utils as kf_container
from kubeflow.trainer.backends.kubernetes import utils as kf_kubernetes
from kubeflow.trainer.types import types as kf

from initializers.common.errors import ConfigError
from initializers.config.contract import Config
from initializers.config.settings import settings_of
from initializers.config.signing import SigningOptions
from initializers.kubeflow import sdk, specs


def _is_repo_id(repo_id: str) -> bool:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


_word = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_."), min_size=1, max_size=10).filter(
    lambda s: s not in (".", "..")
)
_value = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=20)
_pattern = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters=","),
                   min_size=1, max_size=10).filter(lambda p: not p.startswith("/"))  # fmt: skip
_patterns = st.none() | st.lists(_pattern, max_size=4)
_optional = st.none() | _value
_secret = st.none() | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20)  # ASCII
#: As the Hub names repos, and no type's name, plural or singular (huggingface_hub refuses hf://dataset/x as a typo).
_TYPE_NAMES = {*HF_URI_TYPE_PREFIXES, *HF_URI_TYPE_PREFIXES.values()}
_repo_word = _word.filter(lambda s: _is_repo_id(f"{s}/{s}") and s not in _TYPE_NAMES)
_hf_uri = st.builds(
    lambda owner, name, revision, path: f"hf://{owner}/{name}" + (f"@{revision}" if revision else "") + path,
    _repo_word, _repo_word, st.none() | _word, st.sampled_from(["", "/data", "/data/train.jsonl"]),
)  # fmt: skip
_s3_uri = st.builds(lambda bucket, key: f"s3://{bucket}{key}", _word, st.sampled_from(["", "/", "/data", "/a/b.bin"]))
_cache_uri = st.builds("cache://{}/{}".format, _word, _word)

CLASSES = {
    "HuggingFaceDatasetInitializer": dict(storage_uri=_hf_uri, ignore_patterns=_patterns, access_token=_secret),
    "S3DatasetInitializer": dict(storage_uri=_s3_uri, ignore_patterns=_patterns, endpoint=_optional,
                                 access_key_id=_optional, secret_access_key=_secret, region=_optional,
                                 role_arn=_optional),
    "DataCacheInitializer": dict(storage_uri=_cache_uri, metadata_loc=_value, num_data_nodes=st.integers(2, 64),
                                 head_cpu=_optional, head_mem=_optional, worker_cpu=_optional, worker_mem=_optional,
                                 iam_role=_optional),
    "HuggingFaceModelInitializer": dict(storage_uri=_hf_uri, ignore_patterns=_patterns, access_token=_secret),
    "S3ModelInitializer": dict(storage_uri=_s3_uri, ignore_patterns=_patterns, endpoint=_optional,
                               access_key_id=_optional, secret_access_key=_secret, region=_optional,
                               role_arn=_optional),
}  # fmt: skip


@st.composite
def pairs(draw: st.DrawFn, names: tuple[str, ...] = tuple(CLASSES)) -> tuple[object, object]:
    """The same configuration as a Kubeflow SDK object and as ours."""
    name = draw(st.sampled_from(names))
    values = {key: draw(strategy) for key, strategy in CLASSES[name].items()}
    return getattr(kf, name)(**values), getattr(sdk, name)(**values)


def _kubernetes(kubeflow: object) -> tuple[str, dict[str, str]]:
    build = kf_kubernetes.get_dataset_initializer if "Dataset" in type(kubeflow).__name__ or isinstance(
        kubeflow, kf.DataCacheInitializer) else kf_kubernetes.get_model_initializer  # fmt: skip
    spec = build(kubeflow)
    return spec.storage_uri, {variable.name: str(variable.value) for variable in spec.env or []}


@given(pairs())
def test_kubernetes_env_equals_the_kubeflow_sdks(pair: tuple[object, object]):
    kubeflow, ours = pair
    storage_uri, env = _kubernetes(kubeflow)
    assert storage_uri == ours.storage_uri
    assert sdk.kubernetes_env(ours) == env


@given(pairs(tuple(name for name in CLASSES if name != "DataCacheInitializer")))
def test_container_env_equals_the_kubeflow_sdks(pair: tuple[object, object]):
    kubeflow, ours = pair
    images = SimpleNamespace(dataset_initializer_image="d", model_initializer_image="m")
    build = kf_container.get_dataset_initializer if ours.kind.name == "dataset" else kf_container.get_model_initializer
    container = build(kubeflow, images)
    assert sdk.container_env(ours) == container.env
    assert container.command == ["bash", "-c", f"python -m pkg.initializers.{ours.kind.name}"]


@given(pairs(tuple(name for name in CLASSES if name != "DataCacheInitializer")))
def test_the_programs_parse_back_exactly_what_the_builder_wrote(pair: tuple[object, object]):
    _, ours = pair
    assert Config.from_env(sdk.container_env(ours), kind=ours.kind) == ours.to_config(ours.kind.default_output_path)


def test_defaults_match_the_kubeflow_sdk():
    assert sdk.HuggingFaceModelInitializer("hf://o/n").ignore_patterns == kf.HuggingFaceModelInitializer(
        "hf://o/n").ignore_patterns  # fmt: skip
    assert sdk.S3ModelInitializer("s3://b").ignore_patterns == kf.S3ModelInitializer("s3://b").ignore_patterns
    assert sdk.HuggingFaceDatasetInitializer("hf://o/n").ignore_patterns is None
    assert sdk.ContainerBackendConfig().initializer_timeout == 600


@pytest.mark.parametrize(
    "name",
    ["HuggingFaceDatasetInitializer", "S3DatasetInitializer", "DataCacheInitializer", "HuggingFaceModelInitializer",
     "S3ModelInitializer"],
)  # fmt: skip
def test_positional_arguments_land_in_the_kubeflow_sdks_fields(name: str):
    """A drop-in by position too: Kubeflow's fields first, in its order; ours (ALLOW_PATTERNS) keyword-only."""
    ours, theirs = getattr(sdk, name), getattr(kf, name)
    positional = [f.name for f in dataclasses.fields(ours) if f.init and not f.kw_only]
    assert positional == [f.name for f in dataclasses.fields(theirs)]
    assert {f.name for f in dataclasses.fields(ours) if f.kw_only} <= {"allow_patterns", *SIGNING}


#: SIGNATURE's settings, from their schema.
SIGNING = {name for name, _ in settings_of(SigningOptions)}


@pytest.mark.parametrize("name", ["HuggingFaceDatasetInitializer", "S3DatasetInitializer",
                                  "HuggingFaceModelInitializer", "S3ModelInitializer"])  # fmt: skip
def test_hf_and_s3_configurations_take_the_signature_settings_from_their_schema(name: str):
    uri = "hf://o/n" if name.startswith("HuggingFace") else "s3://b/m"
    assert {f.name for f in dataclasses.fields(getattr(sdk, name))} >= SIGNING
    plain = getattr(sdk, name)(uri)
    assert "SIGNATURE" not in sdk.container_env(plain)  # off, the default: nothing written, as the Kubeflow SDK
    signed = getattr(sdk, name)(uri, signature="enforce", signature_public_key="/etc/model-signer/signer.pub")
    env = sdk.container_env(signed)
    assert env["SIGNATURE"] == "enforce" and env["SIGNATURE_PUBLIC_KEY"] == "/etc/model-signer/signer.pub"
    assert Config.from_env(env, kind=signed.kind).options(SigningOptions) == SigningOptions(
        signature="enforce", signature_public_key="/etc/model-signer/signer.pub"
    )
    with pytest.raises(ConfigError, match="SIGNATURE: expected one of off, warn, enforce"):
        getattr(sdk, name)(uri, signature="strict")


@pytest.mark.parametrize("step", [sdk.GcsDatasetInitializer, sdk.GcsModelInitializer])
def test_the_gcs_configurations_are_written_by_the_gs_sources_schema(step: type):
    """Ours alone (the Kubeflow SDK has none): their fields are the gs:// source's settings, written and parsed back
    by the one schema; a URI the programs refuse is refused here, in their words."""
    initializer = step("gs://models/m", emulator_host="http://127.0.0.1:4443", allow_patterns=["*.json"])
    env = sdk.container_env(initializer)
    assert env["STORAGE_URI"] == "gs://models/m" and env["STORAGE_EMULATOR_HOST"] == "http://127.0.0.1:4443"
    assert env["ALLOW_PATTERNS"] == "*.json" and "ANONYMOUS" not in env
    assert Config.from_env(env, kind=initializer.kind) == initializer.to_config(initializer.kind.default_output_path)
    assert sdk.container_env(step("gs://public-data", anonymous=True))["ANONYMOUS"] == "true"
    with pytest.raises(ConfigError, match="is not a Cloud Storage bucket name"):
        step("gs://Bad_Bucket/m")
    with pytest.raises(ConfigError, match="takes gs:// URIs only"):
        step("s3://b/m")


@pytest.mark.parametrize("step", [sdk.AzureDatasetInitializer, sdk.AzureModelInitializer])
def test_the_azure_configurations_are_written_by_the_az_sources_schema(step: type):
    """Ours alone (the Kubeflow SDK has none): their fields are the az:// source's settings, the secrets among them
    written as variables the programs read back and hide; a URI the programs refuse is refused here too."""
    initializer = step("az://models/m", account="acct", sas_token="sv=2025&sig=abc", allow_patterns=["*.json"])
    env = sdk.container_env(initializer)
    assert env["STORAGE_URI"] == "az://models/m" and env["AZURE_STORAGE_ACCOUNT"] == "acct"
    assert env["AZURE_STORAGE_SAS_TOKEN"] == "sv=2025&sig=abc" and env["ALLOW_PATTERNS"] == "*.json"
    assert Config.from_env(env, kind=initializer.kind) == initializer.to_config(initializer.kind.default_output_path)
    assert "sv=2025&sig=abc" in Config.from_env(env, kind=initializer.kind).secrets()
    kserve_form = step("https://acct.blob.core.windows.net/models/m")  # as KServe writes it
    assert sdk.container_env(kserve_form)["STORAGE_URI"] == "https://acct.blob.core.windows.net/models/m"
    with pytest.raises(ConfigError):
        step("az://x/m")  # a container name of 1 character
    with pytest.raises(ConfigError, match="takes az:// URIs only"):
        step("gs://models/m")


def test_the_cache_configuration_has_no_signature_settings():
    assert not SIGNING & {f.name for f in dataclasses.fields(sdk.DataCacheInitializer)}


def test_a_token_given_by_position_is_the_token():
    initializer = sdk.HuggingFaceDatasetInitializer("hf://o/n", None, "hf_token")
    assert initializer.access_token == "hf_token" and initializer.allow_patterns is None
    env = (
        sdk.HuggingFaceModelInitializer("hf://o/n", ["*.bin"], "hf_token", allow_patterns=["*.json"])
        .to_config()
        .to_env()
    )
    assert (env["IGNORE_PATTERNS"], env["ACCESS_TOKEN"], env["ALLOW_PATTERNS"]) == ("*.bin", "hf_token", "*.json")


def test_an_empty_pattern_list_means_ignore_nothing_in_both():
    ours = sdk.HuggingFaceModelInitializer("hf://o/n", ignore_patterns=[])
    assert sdk.container_env(ours)["IGNORE_PATTERNS"] == ""
    assert Config.from_env(sdk.container_env(ours), kind=ours.kind).ignore_patterns == ()


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("S3DatasetInitializer", {"storage_uri": "gs://b/x"}),
        ("S3ModelInitializer", {"storage_uri": "hf://o/n"}),
        ("DataCacheInitializer", {"storage_uri": "cache://s/t", "metadata_loc": "m", "num_data_nodes": 1}),
        ("DataCacheInitializer", {"storage_uri": "s3://s/t", "metadata_loc": "m", "num_data_nodes": 2}),
        ("DataCacheInitializer", {"storage_uri": "cache://s/t/x", "metadata_loc": "m", "num_data_nodes": 2}),
    ],
)
def test_what_the_kubeflow_sdk_refuses_is_refused_here_too(name: str, values: dict):
    with pytest.raises(ValueError):
        getattr(kf, name)(**values)
    with pytest.raises(ValueError):
        getattr(sdk, name)(**values)


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        ("DataCacheInitializer", {"storage_uri": "cache:///t", "metadata_loc": "m", "num_data_nodes": 2},
         "expected cache://SCHEMA/TABLE"),
        ("HuggingFaceModelInitializer", {"storage_uri": "hf://just-a-name"}, "is not a Hub repository"),
        ("HuggingFaceModelInitializer", {"storage_uri": "hf://datasets/org/ds"}, "names a dataset repository"),
        ("HuggingFaceDatasetInitializer", {"storage_uri": "s3://bucket/data"}, "takes hf:// URIs only"),
        ("S3DatasetInitializer", {"storage_uri": "s3://b", "ignore_patterns": ["a,b"]}, "contains ','"),
    ],
)  # fmt: skip
def test_what_the_programs_would_refuse_is_refused_earlier_with_their_message(name: str, values: dict, message: str):
    getattr(kf, name)(**values)  # the Kubeflow SDK lets it through
    with pytest.raises(ValueError, match=message):
        getattr(sdk, name)(**values)


def test_the_container_backend_has_no_cache_initializer():
    cache = sdk.DataCacheInitializer("cache://s/t", metadata_loc="m", num_data_nodes=2)
    with pytest.raises(ValueError, match="no DataCacheInitializer"):
        sdk.container_env(cache)


def test_shard_variables_are_written_and_checked_by_the_programs_schema():
    assert sdk.shard_variables(2, 4) == {"SHARD_INDEX": "2", "SHARD_COUNT": "4"}
    with pytest.raises(ConfigError, match="SHARD_INDEX=4 is out of range"):
        sdk.shard_variables(4, 4)


def _readme_initializer() -> sdk.Initializer:
    """The front page's own, both steps."""
    return sdk.Initializer(
        dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="hf://initializers/tiny-corpus"),
        model=sdk.S3ModelInitializer(
            storage_uri="s3://models/all-MiniLM-L6-v2",
            endpoint="http://127.0.0.1:8333",
            access_key_id="initializers-test-key",
            secret_access_key="initializers-test-secret-7f3a9c",
        ),
    )


def test_an_initializer_with_both_steps_runs_the_step_named(tmp_path: Path):
    initializer = _readme_initializer()
    for step, part in (("model", initializer.model), ("dataset", initializer.dataset)):
        assert specs.docker_run_args(initializer, tmp_path, "image", step=step) == specs.docker_run_args(
            part, tmp_path, "image"
        )
        assert specs.init_container(initializer, "image", step=step) == specs.init_container(part, "image")
    argv, env = specs.docker_run_args(initializer, tmp_path, "image", step="model")
    assert env["SECRET_ACCESS_KEY"] == "initializers-test-secret-7f3a9c" and env["OUTPUT_PATH"] == "/workspace/model"
    assert not any("initializers-test-secret-7f3a9c" in word for word in argv)


def test_an_initializer_with_one_step_needs_no_name(tmp_path: Path):
    model = _readme_initializer().model
    assert specs.docker_run_args(sdk.Initializer(model=model), tmp_path, "image") == specs.docker_run_args(
        model, tmp_path, "image"
    )
    assert specs.docker_run_args(sdk.Initializer(model=model), tmp_path, "image", step="model")[1] == (
        sdk.program_env(model)
    )
    dataset = _readme_initializer().dataset
    assert specs.init_container(sdk.Initializer(dataset=dataset), "image") == specs.init_container(dataset, "image")


def test_an_initializer_with_both_steps_and_no_name_is_refused_naming_the_fix(tmp_path: Path):
    with pytest.raises(TypeError, match=r"holds both .* initializer\.dataset or initializer\.model, or add step="):
        specs.docker_run_args(_readme_initializer(), tmp_path, "image")
    with pytest.raises(TypeError, match="step="):
        specs.init_container(_readme_initializer(), "image")


@pytest.mark.parametrize(
    ("initializer", "step", "error", "message"),
    [
        (sdk.Initializer(), None, TypeError, "holds no dataset or model"),
        (sdk.Initializer(model=sdk.S3ModelInitializer("s3://b/m")), "dataset", TypeError, "holds no dataset"),
        (sdk.S3ModelInitializer("s3://b/m"), "dataset", TypeError, "S3ModelInitializer is a model's step"),
        (sdk.S3ModelInitializer("s3://b/m"), "models", ValueError, "expected 'dataset' or 'model', got 'models'"),
    ],
)  # fmt: skip
def test_a_step_that_is_not_there_is_refused(
    initializer: object, step: str | None, error: type[Exception], message: str, tmp_path: Path
):
    with pytest.raises(error, match=message):
        specs.docker_run_args(initializer, tmp_path, "image", step=step)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "wrong",
    [None, {"storage_uri": "s3://b/m"}, kf.S3ModelInitializer("s3://b/m"), kf.Initializer()],
    ids=["None", "dict", "kubeflow-step", "kubeflow-initializer"],
)
def test_anything_else_is_a_type_error_naming_the_accepted_types(wrong: object, tmp_path: Path):
    accepted = r"expected an initializers\.kubeflow\.sdk Initializer or step \(HuggingFaceDatasetInitializer, .*\)"
    with pytest.raises(TypeError, match=accepted + f", got {type(wrong).__module__}"):
        specs.docker_run_args(wrong, tmp_path, "image")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=accepted):
        specs.init_container(wrong, "image")  # type: ignore[arg-type]
