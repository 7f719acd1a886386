"""The env contract: one schema, parsed from variables and options, written back without loss."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit import docs
from initializers.common.errors import ConfigError
from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config
from initializers.config.registry import option_groups
from initializers.config.settings import setting_fields, settings_of
from initializers.sources import DATASET, MODEL
from initializers.sources.aws.options import AwsOptions
from initializers.sources.hub.options import HubOptions
from initializers.sources.iceberg.options import CacheOptions, KubeflowCacheCluster


def test_unset_empty_and_custom_ignore_patterns_are_distinct():
    assert Config.from_env({}).ignore_patterns is None
    assert Config.from_env({"IGNORE_PATTERNS": ""}).ignore_patterns == ()
    assert Config.from_env({"IGNORE_PATTERNS": "*.bin, logs/ ,,"}).ignore_patterns == ("*.bin", "logs/")
    assert Config.from_env({}).selects_by_default(MODEL)
    assert Config.from_env({"IGNORE_PATTERNS": "*.msgpack,*.h5,*.bin,*.pt,*.pth"}).selects_by_default(MODEL)
    assert not Config.from_env({"IGNORE_PATTERNS": ""}).selects_by_default(MODEL)
    assert not Config.from_env({"IGNORE_PATTERNS": "*.h5,*.msgpack,*.bin,*.pt,*.pth"}).selects_by_default(MODEL)


def test_output_path_defaults_by_kind_and_is_honoured():
    assert Config.from_env({}).output_dir(DATASET) == "/workspace/dataset"
    assert Config.from_env({}).output_dir(MODEL) == "/workspace/model"
    assert Config.from_env({"OUTPUT_PATH": "/data/x"}).output_dir(MODEL) == "/data/x"


def test_a_store_is_opened_with_the_runs_output_path():
    """Each store's opener is handed the shared settings beside its own options (`Config.for_source`), OUTPUT_PATH
    among them: a store reading a folder leaves it out of what it lists."""
    for kind in (DATASET, MODEL):
        for plugin in kind.plugins:
            given = Config.from_env({"OUTPUT_PATH": "/data/x"}, kind=kind).for_source(plugin)
            assert given.output_dir(kind) == "/data/x", plugin.scheme
            assert Config.from_env({}, kind=kind).for_source(plugin).output_dir(kind) == kind.default_output_path


def test_options_win_over_variables():
    config = Config.from_env({"STORAGE_URI": "s3://env", "MAX_WORKERS": "3"}, {"storage_uri": "s3://option"})
    assert config.storage_uri == "s3://option"
    assert config.max_workers == 3


def test_hf_token_is_the_fallback_for_access_token():
    assert Config.from_env({"HF_TOKEN": "hf_a"}, kind=MODEL).options(HubOptions).access_token == "hf_a"
    assert (
        Config.from_env({"HF_TOKEN": "hf_a", "ACCESS_TOKEN": "hf_b"}, kind=MODEL).options(HubOptions).access_token
        == "hf_b"
    )


def test_each_program_reads_only_its_own_sources_variables():
    """The model program takes no cache:// source: the cache's variables keep their defaults there, whatever their
    values, and are listed as ignored; the dataset program reads (and checks) them."""
    env = {"NUM_DATA_NODES": "abc", "CACHE_READY_TIMEOUT_SECONDS": "1.5", "HEAD_CPU": "2", "MAX_WORKERS": "3"}
    config = Config.from_env(env, kind=MODEL)
    assert config.options(CacheOptions) == CacheOptions() and config.max_workers == 3
    assert Config.not_read(env, MODEL) == {"cache://": ["NUM_DATA_NODES", "HEAD_CPU", "CACHE_READY_TIMEOUT_SECONDS"]}
    assert Config.not_read(env, DATASET) == {}
    with pytest.raises(ConfigError, match="NUM_DATA_NODES: expected a positive integer, got 'abc'"):
        Config.from_env(env, kind=DATASET)
    # The S3 access the cache shares with s3:// is the model program's too.
    assert Config.from_env({"ENDPOINT": "http://s3"}, kind=MODEL).options(AwsOptions).endpoint == "http://s3"
    assert Config.not_read({"ENDPOINT": "http://s3"}, MODEL) == {}


def test_another_programs_variables_are_never_near_misses_of_this_ones():
    Config.refuse_misspellings({"NUM_DATA_NODES": "2", "METADATA_LOC": "s3://b/m.json"}, MODEL)
    Config.refuse_misspellings({"NUM_DATA_NODE": "2"}, MODEL)  # a slip of a variable the model program never reads
    with pytest.raises(ConfigError, match="NUM_DATA_NODE is not a variable these programs read; did you mean NUM_"):
        Config.refuse_misspellings({"NUM_DATA_NODE": "2"}, DATASET)


def test_empty_text_variables_count_as_unset():
    assert Config.from_env({"ENDPOINT": "", "REGION": "  "}, kind=DATASET) == Config.build({}, DATASET)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_WORKERS": "zero"}, "MAX_WORKERS: expected an integer from 1 to 256, got 'zero'"),
        ({"MAX_WORKERS": "0"}, "MAX_WORKERS: expected an integer from 1 to 256"),
        ({"MAX_WORKERS": "257"}, "MAX_WORKERS: expected an integer from 1 to 256"),
        ({"CLUSTER_SIZE": "-3"}, "CLUSTER_SIZE: expected a positive integer"),
        (
            {"CACHE_READY_TIMEOUT_SECONDS": "soon"},
            "CACHE_READY_TIMEOUT_SECONDS: expected a positive integer, got 'soon'",
        ),
        ({"CACHE_READY_TIMEOUT_SECONDS": "0"}, "CACHE_READY_TIMEOUT_SECONDS: expected a positive integer"),
        ({"ANONYMOUS": "maybe"}, "ANONYMOUS: expected true or false"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT: expected one of json, console"),
        ({"PROGRESS_INTERVAL": "nan"}, "PROGRESS_INTERVAL: expected a positive number"),
    ],
)
def test_bad_values_name_the_variable_and_the_expected_form(env: dict[str, str], message: str):
    with pytest.raises(ConfigError, match=message):
        Config.from_env(env, kind=DATASET)


def test_options_are_named_in_errors():
    with pytest.raises(ConfigError, match="--max-workers: expected an integer from 1 to 256"):
        Config.from_env({}, {"max_workers": "x"})


def test_missing_storage_uri_is_a_config_error_naming_the_programs_own_schemes():
    for kind in (MODEL, DATASET):
        *schemes, last = [f"{scheme}://..." for scheme in kind.schemes]
        given = re.escape(f"give the source as {', '.join(schemes)} or {last}")
        with pytest.raises(ConfigError, match=f"^STORAGE_URI is not set: {given}$"):
            Config.from_env({}).require_storage_uri(kind)


def test_secrets_are_listed_and_never_echoed():
    config = Config.from_env(
        {"ACCESS_TOKEN": "hf_secret", "SECRET_ACCESS_KEY": "sk", "ACCESS_KEY_ID": "id"}, kind=MODEL
    )
    assert sorted(config.secrets()) == ["hf_secret", "sk"]


def test_every_setting_has_a_distinct_variable_and_option():
    settings = [s for _, s in Config.settings(DATASET)]
    assert len({s.env for s in settings}) == len(settings) == len({name for name, _ in Config.settings(DATASET)})
    assert {s.option for s in settings} >= {"--storage-uri", "--ignore-patterns", "--output-path"}


def test_each_sources_options_are_in_the_schema_exactly_once_and_claim_no_other_variable():
    flattened = Config.settings(DATASET)
    for group in (HubOptions, AwsOptions, CacheOptions):
        assert isinstance(Config.from_env({}, kind=DATASET).options(group), group)
        for declared in settings_of(group):
            assert flattened.count(declared) == 1, declared
    assert set(settings_of(KubeflowCacheCluster)) <= set(settings_of(CacheOptions))
    names = [name for name, _ in flattened]
    variables = [variable for _, s in flattened for variable in (s.env, *s.fallback_env)]
    assert len(set(names)) == len(names)  # options and `build` key on field names
    assert len(set(variables)) == len(variables)


def test_a_sources_options_are_read_into_its_group():
    config = Config.from_env({"REVISION": "v1", "ENDPOINT": "http://s3", "ANONYMOUS": "yes", "HEAD_CPU": "2",
                              "NUM_DATA_NODES": "3", "MAX_WORKERS": "4"}, kind=DATASET)  # fmt: skip
    assert config.options(HubOptions) == HubOptions(revision="v1")
    assert config.options(AwsOptions) == AwsOptions(endpoint="http://s3")
    assert config.options(AnonymousAccess) == AnonymousAccess(anonymous=True)  # a group s3 and cache share
    assert config.options(CacheOptions) == CacheOptions(num_data_nodes=3, kubeflow=KubeflowCacheCluster(head_cpu="2"))
    assert config.max_workers == 4
    assert config.to_env() == {"REVISION": "v1", "ENDPOINT": "http://s3", "ANONYMOUS": "true", "NUM_DATA_NODES": "3",
                               "HEAD_CPU": "2", "MAX_WORKERS": "4"}  # fmt: skip


def test_a_pattern_with_a_comma_cannot_be_written():
    with pytest.raises(ConfigError, match="contains ','"):
        Config(ignore_patterns=("a,b",)).to_env()


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1).map(str.strip).filter(bool)
_pattern = (
    st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters=","), min_size=1)
    .map(str.strip)
    .filter(lambda pattern: pattern and not pattern.startswith("/"))  # an absolute pattern is refused by design
)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    values = {}
    for field in (found for schema in (Config, *option_groups(DATASET.plugins)) for found in setting_fields(schema)):
        codec = field.metadata["setting"].codec.expected
        if codec.startswith("an integer from 1 to "):
            strategy = st.none() | st.integers(1, 256)
        elif codec == "a positive integer":
            strategy = st.none() | st.integers(1, 10**6)
        elif codec == "an integer, 0 or more":
            strategy = st.none() | st.integers(0, 10**6)
        elif codec == "a positive number":
            strategy = st.none() | st.floats(0.001, 1e6)
        elif codec == "true or false":
            strategy = st.booleans()
        elif codec == "comma-separated glob patterns":  # an empty list that means unset is None
            least = 1 if field.metadata["setting"].codec.empty_means_unset else 0
            strategy = st.none() | st.lists(_pattern, min_size=least, max_size=5).map(tuple)
        elif codec.startswith("bytes per second"):
            strategy = st.none() | st.integers(1, 10**12)
        elif codec.startswith("one of "):
            choices = st.sampled_from(codec.removeprefix("one of ").split(", "))
            strategy = choices if field.default is not None else st.none() | choices  # not half of them filtered out
        elif codec.startswith("a JSON object of request headers"):  # HTTP_HEADERS: names, and values in ASCII
            header = st.from_regex(r"X-[A-Za-z0-9-]{1,12}", fullmatch=True)
            value = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))
            strategy = st.none() | st.dictionaries(header, value, max_size=3).map(lambda given: tuple(given.items()))
        elif field.metadata["setting"].secret:  # tokens and keys are ASCII
            strategy = st.none() | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)
        else:
            strategy = st.none() | _text
        if field.default is not None:  # a setting with a default is never None: unset means the default
            strategy = strategy.filter(lambda value: value is not None)
        values[field.name] = draw(strategy)
    return Config.build(values, DATASET)


@given(configs())
def test_parse_of_to_env_is_the_identity(config: Config):
    assert Config.from_env(config.to_env(), kind=DATASET) == config


def test_the_configuration_page_documents_every_variable():
    table = docs.section(docs.page("docs/configuration.md"), "# Configuration")
    first_cells = {row.split("|")[1] for row in table.splitlines() if row.startswith("| `")}
    documented = {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}
    assert {s.env for _, s in Config.settings(DATASET)} <= documented
