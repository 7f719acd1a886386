"""The environment contract: one typed schema read by the programs and written by the SDK-side builder.

Every setting is a field of `Config` (the settings every source shares) or of an option group a source declares
beside itself (`registry.SourcePlugin.options`), held as parsed (`config.options(AwsOptions)`). Each carries its
variable name, help text and codec (the toolkit: `settings`), so parsing (`Config.from_env`), the CLI options and
serialisation (`Config.to_env`) come from the same definitions and cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from initializers.common.errors import ConfigError
from initializers.config import misspellings
from initializers.config.registry import SourcePlugin, option_groups
from initializers.config.settings import (
    BANDWIDTH,
    BOOL,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    Codec,
    Setting,
    build,
    choice,
    env_of,
    parse_schema,
    patterns_field,
    setting_field,
    settings_of,
    values_of,
    whole_number,
)

G = TypeVar("G")


@dataclass(frozen=True)
class WeightFormat:
    """Weights in one format, and the files that come only with them (Meta's `original/` checkpoint folder)."""

    name: str
    patterns: tuple[str, ...]
    companions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    """What distinguishes the dataset program from the model program: defaults, not code, and the stores (`programs`
    makes both of one tuple). It accepts those of its stores that name it (`SourcePlugin.kinds`)."""

    name: str
    default_output_path: str
    #: The list the Kubeflow SDK sends when the user leaves `ignore_patterns` alone (see `Config.selects_by_default`).
    default_ignore_patterns: tuple[str, ...]
    #: The default selection's allow side (empty: every file) ...
    default_allow: tuple[str, ...] = ()
    #: ... its ignore side ...
    default_ignore: tuple[str, ...] = ()
    #: ... and weight formats by preference, of which it keeps only the first the source has (see `selection`).
    weight_formats: tuple[WeightFormat, ...] = ()
    #: The default selection in words, for --help (empty: every file).
    default_selection: str = ""
    #: Every store of both programs, in the programs' order (the composition root's tuple).
    stores: tuple[SourcePlugin, ...] = field(default=(), compare=False, repr=False)

    @property
    def program(self) -> str:
        return f"{self.name}-initializer"

    @property
    def plugins(self) -> tuple[SourcePlugin, ...]:
        """The stores this program accepts, in the programs' order: the order its messages and --help list them in."""
        return tuple(plugin for plugin in self.stores if self.name in plugin.kinds)

    @property
    def schemes(self) -> tuple[str, ...]:
        return tuple(plugin.scheme for plugin in self.plugins)

    def plugin(self, scheme: str) -> SourcePlugin:
        """The store of `scheme`, which `uris.scheme_of` has found for this program."""
        return next(plugin for plugin in self.plugins if plugin.scheme == scheme)


_DATASET = Kind("dataset", "/workspace/dataset", ())
#: What a trainer loads (transformers, sentence-transformers, PEFT, llama.cpp): docs/configuration.md explains it.
_MODEL = Kind(
    "model",
    "/workspace/model",
    ("*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth"),
    default_allow=(
        *("*.json", "*.yaml", "*.yml"),  # configs, weight indexes, sentence-transformers modules
        *("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf"),  # weights, of which one format is kept
        *("tokenizer*", "vocab*", "merges*", "*.txt", "*.model", "*.spm", "*.tiktoken"),  # tokenizers
        *("*.jinja", "*.py"),  # chat templates; remote code, for trust_remote_code
    ),
    default_ignore=("onnx/", "openvino/", "coreml/", "*.mlpackage/*"),  # other runtimes' copies (.bin among them)
    weight_formats=(
        WeightFormat("safetensors", ("*.safetensors",)),
        WeightFormat(".bin/.pt/.pth", ("*.bin", "*.pt", "*.pth"), companions=("original/",)),
        WeightFormat("GGUF", ("*.gguf",)),
    ),
    default_selection="what a trainer loads, in one weight format",
)


def _either(words: list[str]) -> str:
    """`a, b or c`."""
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _storage_uri_help(kind: Kind) -> str:
    """The forms of the stores' URIs (and the schemes a store takes as its own: `http://`), then what a store claims
    of another's scheme, which goes to it first (`registry` states the rule)."""
    usages = [plugin.usage + "".join(f" (or {scheme}://)" for scheme in plugin.also_schemes) for plugin in kind.plugins]
    claims = "".join(f"; or {plugin.claim.usage}" for plugin in kind.plugins if plugin.claim)
    first = ", which go to their stores first" if claims else ""
    return f"Source: {_either(usages)}{claims}{first}."


_GLOBS = "Comma-separated globs matched against paths relative to the source root"


def _ignore_patterns_help(kind: Kind) -> str:
    if not kind.default_selection:
        return f"{_GLOBS}: the files they match are not fetched [default: none]."
    return (
        f"{_GLOBS}. Unset, or the Kubeflow SDK's default list ({','.join(kind.default_ignore_patterns)}): the "
        f"{kind.name} default, {kind.default_selection}. Set but empty: ignore nothing. Any other list: exactly that "
        "list."
    )


def _allow_patterns_help(kind: Kind) -> str:
    only = (
        "Comma-separated globs, as IGNORE_PATTERNS: only matching files are fetched, less those IGNORE_PATTERNS removes"
    )
    if not kind.default_allow:
        return f"{only} [default: every file]."
    return (
        f"{only}; given, it replaces the {kind.name} default's list [default: that list while IGNORE_PATTERNS selects "
        f"the {kind.name} default; else every file]."
    )


MAX_WORKERS_LIMIT = 256
LOG_FORMAT = choice("json", "console")
LOG_LEVEL = choice("debug", "info", "warning", "error")
DEFAULT_READ_TIMEOUT = 60.0


@dataclass(frozen=True)
class Config:
    """One run's configuration. `None` means "not given": defaults that depend on the kind apply later."""

    storage_uri: str | None = setting_field("STORAGE_URI", _storage_uri_help)
    output_path: str | None = setting_field(
        "OUTPUT_PATH", lambda kind: f"Destination folder [default: {kind.default_output_path}]."
    )
    ignore_patterns: tuple[str, ...] | None = patterns_field(
        "IGNORE_PATTERNS", _ignore_patterns_help, empty_means_unset=False
    )
    allow_patterns: tuple[str, ...] | None = patterns_field("ALLOW_PATTERNS", _allow_patterns_help)
    max_workers: int | None = setting_field(
        "MAX_WORKERS",
        "Most parallel transfers, at most 256 [default: per source, stored files: 64 streams, from 8 up while it "
        "pays, and 256 small-file requests: 64 at once, more from the first over a long round trip].",
        Codec(whole_number(1, MAX_WORKERS_LIMIT), str, f"an integer from 1 to {MAX_WORKERS_LIMIT}"),
    )
    read_timeout: float = setting_field(
        "READ_TIMEOUT",
        f"Seconds without a byte before a request is abandoned and retried [default: {DEFAULT_READ_TIMEOUT:g}], and "
        "for each 64 KiB of an answer, so a trickle is abandoned too; falls back to HF_HUB_DOWNLOAD_TIMEOUT.",
        POSITIVE_NUMBER,
        default=DEFAULT_READ_TIMEOUT,
        fallback_env=("HF_HUB_DOWNLOAD_TIMEOUT",),
    )
    shard_index: int | None = setting_field(
        "SHARD_INDEX",
        "This initializer's share, 0 .. SHARD_COUNT-1, of a plan split over SHARD_COUNT initializers writing one "
        "OUTPUT_PATH.",
        NON_NEGATIVE_INT,
    )
    shard_count: int | None = setting_field(
        "SHARD_COUNT",
        "How many initializers split the plan; with it, JOB_COMPLETION_INDEX stands in for an unset SHARD_INDEX.",
        POSITIVE_INT,
    )
    job_completion_index: int | None = setting_field(
        "JOB_COMPLETION_INDEX",
        "Set by Kubernetes in an Indexed Job's pods: the shard index when SHARD_COUNT is set and SHARD_INDEX is not.",
        NON_NEGATIVE_INT,
    )
    verify: bool = setting_field(
        "VERIFY",
        "Re-hash files an earlier run completed against the source's checksums, and fetch again those that differ.",
        BOOL,
        default=False,
    )
    dry_run: bool = setting_field(
        "DRY_RUN",
        "List and plan as a run would, print the plan (a table of sizes and paths with a total on a terminal; else "
        "JSON lines, alone on stdout, the logs on stderr) and exit 0, writing nothing under OUTPUT_PATH.",
        BOOL,
        default=False,
    )
    replace_existing: bool = setting_field(
        "REPLACE_EXISTING",
        "When OUTPUT_PATH holds another source (its manifest says so), remove that source's files (those its manifest "
        "lists) and fetch this one; without it, such a run is refused with exit 2, as the two would mix.",
        BOOL,
        default=False,
    )
    max_bandwidth: int | None = setting_field(
        "MAX_BANDWIDTH",
        "Most bytes per second the whole run reads, all connections together: 50M is 50 MiB/s, as rclone's --bwlimit "
        "(K, M, G, T are binary multiples) [default: no cap].",
        BANDWIDTH,
    )
    timeout: float | None = setting_field(
        "TIMEOUT", "Overall deadline in seconds; past it the run stops with exit 1 [default: none].", POSITIVE_NUMBER
    )
    progress_interval: float | None = setting_field(
        "PROGRESS_INTERVAL", "Seconds between progress events [default: 5].", POSITIVE_NUMBER
    )
    log_format: str | None = setting_field(
        "LOG_FORMAT",
        "The logs' format, on stderr: json or console [default: console when stderr is a terminal, else json]; json "
        "also turns the terminal's live view off.",
        LOG_FORMAT,
    )
    log_level: str | None = setting_field("LOG_LEVEL", "debug, info, warning or error [default: info].", LOG_LEVEL)
    #: The option groups of the program's stores as given (`from_env`, `build`: all of them; a source is opened with
    #: only its own, `for_source`); a group not held reads as its defaults.
    source_options: tuple[Any, ...] = field(default=())

    def options(self, group: type[G]) -> G:
        return next((given for given in self.source_options if type(given) is group), group())

    def for_source(self, plugin: SourcePlugin) -> Config:
        """This configuration as `plugin`'s source receives it: the shared settings and its own option groups only;
        a shared setting it refuses is an error naming the variable."""
        for name, setting in self.settings():
            why = plugin.refuses.get(name)
            if why is not None and getattr(self, name):
                raise ConfigError(f"{setting.env} does not apply to {plugin.scheme}:// sources: {why}")
        return replace(self, source_options=tuple(self.options(group) for group in plugin.options))

    @staticmethod
    def refuse_misspellings(env: Mapping[str, str], kind: Kind) -> None:
        """A ConfigError naming each near miss in `env` of a variable the `kind` program reads (`OUTPUT_PAHT`) and the
        one meant; another program's own variables are ignored (`not_read`), never near misses."""
        contract = _variables(_settings(kind.stores))
        others = [name for name in env if name not in contract]
        own = Config.settings(kind)
        habits = {habit: " or ".join((s.env, *s.fallback_env)) for _, s in own for habit in s.habits}
        found = misspellings.misspelt(others, _variables(own), habits)
        if found:
            raise ConfigError(misspellings.message(found))

    @staticmethod
    def not_read(env: Mapping[str, str], kind: Kind) -> dict[str, list[str]]:
        """The contract's variables set in `env` that the `kind` program does not read (the cache source's, for the
        model program), by the sources that read them (`cache://`): the program ignores them, and says so."""
        own = _variables(Config.settings(kind))
        found: dict[str, list[str]] = {}
        for group in option_groups(kind.stores):
            readers = ", ".join(f"{plugin.scheme}://" for plugin in kind.stores if group in plugin.options)
            for name in (name for _, setting in settings_of(group) for name in (setting.env, *setting.fallback_env)):
                if name in env and name not in own:
                    found.setdefault(readers, []).append(name)
        return found

    @staticmethod
    def help_text(name: str, setting: Setting, kind: Kind) -> str:
        """`setting`'s --help in the `kind` program: its text for that program, then what it means for, or why it is
        refused by, each of the program's sources that says so (`SourcePlugin.notes`, `refuses`)."""
        notes = [plugin.notes[name] for plugin in kind.plugins if name in plugin.notes]
        notes += [f"Does not apply to {p.scheme}://: {p.refuses[name]}." for p in kind.plugins if name in p.refuses]
        return " ".join([setting.help_for(kind), *notes])

    @staticmethod
    def settings(kind: Kind | None = None) -> list[tuple[str, Setting]]:
        """(field name, setting) for every variable the `kind` program reads: the shared ones, then the option groups
        of the sources it accepts (None: the shared ones alone)."""
        return _settings(kind.plugins if kind else ())

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], options: Mapping[str, str | None] | None = None, kind: Kind | None = None
    ) -> Config:
        """Parse the settings the `kind` program reads (None: the shared ones alone) from variables and raw option
        values; an option given wins over its variable. The option groups of other programs' sources keep their
        defaults, whatever their variables say (the model program never reads the cache's NUM_DATA_NODES)."""
        groups = tuple(parse_schema(group, env, options) for group in option_groups(kind.plugins if kind else ()))
        return replace(parse_schema(cls, env, options), source_options=groups)

    @classmethod
    def build(cls, values: Mapping[str, Any], kind: Kind | None = None) -> Config:
        """The `kind` program's configuration (None: the shared settings alone) from {field name: value}, shared or a
        group's (names are unique: `programs` checks them); settings not given keep their defaults."""
        groups = option_groups(kind.plugins if kind else ())
        owner = {name: group for group in groups for name, _ in settings_of(group)}
        given: dict[type, dict[str, Any]] = {schema: {} for schema in (cls, *groups)}
        for name, value in values.items():
            given[owner.get(name, cls)][name] = value  # an unknown name goes to Config, whose `build` refuses it
        return replace(build(cls, given[cls]), source_options=tuple(build(group, given[group]) for group in groups))

    def to_env(self) -> dict[str, str]:
        """The variables that reproduce this configuration: `Config.from_env(c.to_env()) == c`."""
        return {name: value for group in (self, *self.source_options) for name, value in env_of(group).items()}

    def secrets(self) -> list[str]:
        """Secret values present in this configuration, for log redaction."""
        return [value for group in (self, *self.source_options) for value in _secret_values(group)]

    def output_dir(self, kind: Kind) -> str:
        return self.output_path or kind.default_output_path

    def selects_by_default(self, kind: Kind) -> bool:
        """IGNORE_PATTERNS unset, or the list the Kubeflow SDK sends by default: the kind's default selection."""
        return self.ignore_patterns is None or self.ignore_patterns == kind.default_ignore_patterns

    def shard(self) -> tuple[int, int] | None:
        """(index, count) of this run's share of a plan split over SHARD_COUNT initializers, else None."""
        if self.shard_count is None:
            if self.shard_index is not None:
                raise ConfigError("SHARD_INDEX is set but SHARD_COUNT is not: say how many initializers split the plan")
            return None
        return self.share_of(self.shard_count)

    def share_of(self, count: int) -> tuple[int, int]:
        """(index, count): SHARD_INDEX, else JOB_COMPLETION_INDEX as an Indexed Job sets it, of `count` shares."""
        index = self.shard_index if self.shard_index is not None else self.job_completion_index
        if index is None:
            raise ConfigError(
                "SHARD_COUNT is set but SHARD_INDEX is not (nor JOB_COMPLETION_INDEX, as an Indexed Job sets it)"
            )
        if index >= count:
            raise ConfigError(f"SHARD_INDEX={index} is out of range: {count} shards are numbered 0 to {count - 1}")
        return index, count

    def require_storage_uri(self, kind: Kind) -> str:
        """STORAGE_URI; a ConfigError naming the schemes the `kind` program accepts when it is not set."""
        if not self.storage_uri:
            raise ConfigError(
                f"STORAGE_URI is not set: give the source as {_either([f'{s}://...' for s in kind.schemes])}"
            )
        return self.storage_uri


def programs(stores: tuple[SourcePlugin, ...]) -> tuple[Kind, Kind]:
    """The dataset and the model programs, accepting `stores` (in the order they list them). Refuses a scheme
    declared twice, a store no program accepts, and a variable or field name two settings would share: the schema is
    one flat set of variables, and two settings of one name would silently read the same value."""
    schemes = [plugin.scheme for plugin in stores]
    if twice := {scheme for scheme in schemes if schemes.count(scheme) > 1}:
        raise RuntimeError(f"the scheme {twice.pop()}:// is declared twice")
    if idle := [plugin.scheme for plugin in stores if not plugin.kinds]:
        raise RuntimeError(f"the scheme {idle[0]}:// is declared for no program")
    _check_unique(_settings(stores))
    return replace(_DATASET, stores=stores), replace(_MODEL, stores=stores)


def _settings(plugins: tuple[SourcePlugin, ...]) -> list[tuple[str, Setting]]:
    return settings_of(Config) + [setting for group in option_groups(plugins) for setting in settings_of(group)]


def _check_unique(settings: list[tuple[str, Setting]]) -> None:
    variables = [variable for _, setting in settings for variable in (setting.env, *setting.fallback_env)]
    if twice := [variable for variable in variables if variables.count(variable) > 1]:
        raise RuntimeError(f"the variable {twice[0]} is declared by two settings")
    names = [name for name, _ in settings]
    if twice := [name for name in names if names.count(name) > 1]:
        raise RuntimeError(f"the setting field {twice[0]!r} is declared twice: values are built by field name")


def _variables(settings: list[tuple[str, Setting]]) -> set[str]:
    return {name for _, setting in settings for name in (setting.env, *setting.fallback_env)}


def _secret_values(schema: Any) -> list[str]:
    values = values_of(schema)
    return [part for name, setting in settings_of(type(schema)) for part in setting.secrets_in(values[name])]
