"""The environment contract: one typed schema read by the programs and written by the SDK-side builder.

Every setting is a field of `Config` carrying its variable name, help text and codec, so parsing
(`Config.from_env`), the CLI options and serialisation (`Config.to_env`) all come from the same
definitions and cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from initializers.errors import ConfigError

T = TypeVar("T")

#: Variables of other tools (boto3, huggingface_hub, the system) are never typos of ours.
_FOREIGN_PREFIXES = ("AWS_", "HF_", "HUGGINGFACE_", "KUBERNETES_", "PYTHON", "LC_", "XDG_")


@dataclass(frozen=True)
class WeightFormat:
    """Weights in one format, and the files that come only with them (Meta's `original/` checkpoint folder)."""

    name: str
    patterns: tuple[str, ...]
    companions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    """What distinguishes the dataset program from the model program: defaults, not code."""

    name: str
    default_output_path: str
    #: The list the Kubeflow SDK sends when the user leaves `ignore_patterns` alone: IGNORE_PATTERNS unset or
    #: exactly this list selects the kind's default selection (below); any other list means exactly that list.
    default_ignore_patterns: tuple[str, ...]
    schemes: tuple[str, ...]
    #: The default selection's allow side (empty: every file) ...
    default_allow: tuple[str, ...] = ()
    #: ... its ignore side ...
    default_ignore: tuple[str, ...] = ()
    #: ... and weight formats by preference, of which it keeps only the first the source has (see `selection`).
    weight_formats: tuple[WeightFormat, ...] = ()

    @property
    def program(self) -> str:
        return f"{self.name}-initializer"


DATASET = Kind("dataset", "/workspace/dataset", (), ("hf", "s3", "cache"))
#: What a trainer loads (transformers, sentence-transformers, PEFT, llama.cpp): README.md explains each rule.
MODEL = Kind(
    "model",
    "/workspace/model",
    ("*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth"),
    ("hf", "s3"),
    default_allow=(
        # configs, weight indexes, sentence-transformers modules
        *("*.json", "*.yaml", "*.yml"),
        # weights, of which one format is kept
        *("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf"),
        # tokenizers
        *("tokenizer*", "vocab*", "merges*", "*.txt", "*.model", "*.spm", "*.tiktoken"),
        # chat templates; remote code, for trust_remote_code
        *("*.jinja", "*.py"),
    ),
    default_ignore=("onnx/", "openvino/", "coreml/", "*.mlpackage/*"),  # other runtimes' copies (.bin among them)
    weight_formats=(
        WeightFormat("safetensors", ("*.safetensors",)),
        WeightFormat(".bin/.pt/.pth", ("*.bin", "*.pt", "*.pth"), companions=("original/",)),
        WeightFormat("GGUF", ("*.gguf",)),
    ),
)


@dataclass(frozen=True)
class Codec(Generic[T]):
    """Turns one variable's text into a typed value and back; `expected` completes error messages."""

    parse: Callable[[str], T]
    format: Callable[[T], str]
    expected: str
    empty_means_unset: bool = True


def checked_value(raw: str, variable: str, secret: bool = False) -> str:
    """`raw` without the one trailing newline (LF or CRLF) a Kubernetes Secret made from a file carries; a ConfigError
    naming `variable`, never the value, for any other control character (tab included): every value may end up in a
    request line, a header or a URL, where one would end it or start another. A `secret` (a token, a key) must also
    be ASCII, as they all are: it goes into a header as it is."""
    text = raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw
    bad = next((char for char in text if char < " " or char == "\x7f" or (secret and not char.isascii())), None)
    if bad is not None:
        kind, rule = (
            ("control character", "only a single trailing newline is accepted, and dropped")
            if bad.isascii()
            else ("character outside ASCII", "tokens and keys are ASCII")
        )
        raise ConfigError(
            f"{variable}: contains the {kind} U+{ord(bad):04X} at position {text.index(bad)} (value not shown); {rule}"
        )
    return text


def _parse_text(raw: str) -> str:
    return raw.strip()


def _parse_positive_int(raw: str) -> int:
    value = int(raw.strip())
    if value < 1:
        raise ValueError("not positive")
    return value


def _parse_non_negative_int(raw: str) -> int:
    value = int(raw.strip())
    if value < 0:
        raise ValueError("negative")
    return value


MAX_WORKERS_LIMIT = 256


def _parse_workers(raw: str) -> int:
    value = _parse_positive_int(raw)
    if value > MAX_WORKERS_LIMIT:
        raise ValueError("too many")
    return value


def _parse_positive_float(raw: str) -> float:
    value = float(raw.strip())
    if not value > 0 or value == float("inf"):
        raise ValueError("not a positive number")
    return value


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("not a boolean")


def _patterns(variable: str, empty_means_unset: bool) -> Codec[tuple[str, ...]]:
    """Comma-separated globs, as the Kubeflow SDK joins them; blanks around and between commas are dropped."""

    def parse(raw: str) -> tuple[str, ...]:
        patterns = tuple(part.strip() for part in raw.split(",") if part.strip())
        for pattern in patterns:
            if pattern.startswith("/"):
                raise ConfigError(
                    f"{variable}: {pattern!r} starts with '/', but patterns match paths relative to the source root "
                    f"(write {pattern.lstrip('/')!r})"
                )
        return patterns

    def write(patterns: tuple[str, ...]) -> str:
        for pattern in patterns:
            if "," in pattern:
                raise ConfigError(f"{variable}: pattern {pattern!r} contains ',', which the list form cannot carry")
        return ",".join(patterns)

    return Codec(parse, write, "comma-separated glob patterns", empty_means_unset)


#: MAX_BANDWIDTH's suffixes: binary multiples, as rclone's --bwlimit reads them.
_BANDWIDTH_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_BANDWIDTH = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)", re.IGNORECASE)


def _parse_bandwidth(raw: str) -> int:
    """Bytes per second: `50M` is 50 MiB/s."""
    found = _BANDWIDTH.fullmatch(raw.strip())
    if found is None:
        raise ValueError("not a rate")
    rate = int(float(found[1]) * _BANDWIDTH_UNITS[found[2].upper()])
    if rate < 1:
        raise ValueError("below one byte per second")
    return rate


def _choice(*choices: str) -> Codec[str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError("not a choice")
        return value

    return Codec(parse, str, "one of " + ", ".join(choices))


TEXT: Codec[str] = Codec(_parse_text, str, "text")
POSITIVE_INT: Codec[int] = Codec(_parse_positive_int, str, "a positive integer")
NON_NEGATIVE_INT: Codec[int] = Codec(_parse_non_negative_int, str, "an integer, 0 or more")
WORKERS: Codec[int] = Codec(_parse_workers, str, f"an integer from 1 to {MAX_WORKERS_LIMIT}")
POSITIVE_NUMBER: Codec[float] = Codec(_parse_positive_float, repr, "a positive number")
BOOL: Codec[bool] = Codec(_parse_bool, lambda value: "true" if value else "false", "true or false")
BANDWIDTH: Codec[int] = Codec(
    _parse_bandwidth, str, "bytes per second, a number optionally followed by K, M, G or T (binary: 1K = 1024)"
)
LOG_FORMAT = _choice("json", "console")
REQUESTER = _choice("requester")
LOG_LEVEL = _choice("debug", "info", "warning", "error")
#: Seconds without a byte before a request is abandoned and retried, for every source.
DEFAULT_READ_TIMEOUT = 60.0


@dataclass(frozen=True)
class Setting:
    """How one `Config` field appears in the environment and on the command line."""

    env: str
    help: str
    codec: Codec[Any]
    secret: bool = False
    fallback_env: tuple[str, ...] = ()

    @property
    def option(self) -> str:
        return "--" + self.env.lower().replace("_", "-")


def _setting(env: str, help: str, codec: Codec[Any] = TEXT, default: Any = None, **extra: Any) -> Any:
    return field(default=default, metadata={"setting": Setting(env, help, codec, **extra)})


def settings_of(schema: type) -> list[tuple[str, Setting]]:
    """(field name, setting) for every variable a schema declares with `_setting`, in declaration order."""
    return [(f.name, f.metadata["setting"]) for f in dataclasses.fields(schema)]


def parse_settings(
    settings: list[tuple[str, Setting]], env: Mapping[str, str], options: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """{field name: parsed value} for the settings given as variables or raw option values; an option given wins
    over its variable. `Config` is the contract; a separate program (the cache server) declares its own few."""
    values: dict[str, Any] = {}
    for name, setting in settings:
        option = (options or {}).get(name)
        if option is not None:
            source, raw = setting.option, option
        else:
            source, raw = next(
                ((var, env[var]) for var in (setting.env, *setting.fallback_env) if var in env), (None, None)
            )
        if raw is None:
            continue
        raw = checked_value(raw, source or setting.env, setting.secret)
        if setting.codec.empty_means_unset and not raw.strip():
            continue
        try:
            values[name] = setting.codec.parse(raw)
        except ConfigError:
            raise  # a codec's own, more precise message
        except ValueError:
            shown = "***" if setting.secret else repr(raw)
            raise ConfigError(f"{source}: expected {setting.codec.expected}, got {shown}") from None
    return values


@dataclass(frozen=True)
class Config:
    """One run's configuration. `None` means "not given": defaults that depend on the kind apply later."""

    storage_uri: str | None = _setting(
        "STORAGE_URI",
        "Source: hf://OWNER/NAME[@REVISION][/PATH], s3://BUCKET[/PREFIX] or cache://SCHEMA/TABLE (dataset only).",
    )
    output_path: str | None = _setting(
        "OUTPUT_PATH", "Destination folder [default: /workspace/dataset or /workspace/model]."
    )
    ignore_patterns: tuple[str, ...] | None = _setting(
        "IGNORE_PATTERNS",
        "Comma-separated globs matched against paths relative to the source root. Unset, or the Kubeflow SDK's "
        "default list (*.msgpack,*.h5,*.bin,*.pt,*.pth): the kind's default (model: what a trainer loads, one weight "
        "format; dataset: none). Set but empty: ignore nothing. Any other list: exactly that list.",
        _patterns("IGNORE_PATTERNS", empty_means_unset=False),
    )
    allow_patterns: tuple[str, ...] | None = _setting(
        "ALLOW_PATTERNS",
        "Comma-separated globs, as IGNORE_PATTERNS: only matching files are fetched, less those IGNORE_PATTERNS "
        "removes; for a model it replaces the default's list of what a trainer loads [default: every file; model: "
        "that list].",
        _patterns("ALLOW_PATTERNS", empty_means_unset=True),
    )
    access_token: str | None = _setting(
        "ACCESS_TOKEN", "HuggingFace Hub token (falls back to HF_TOKEN).", secret=True, fallback_env=("HF_TOKEN",)
    )
    revision: str | None = _setting("REVISION", "HuggingFace branch, tag or commit; @REVISION in the URI wins.")
    endpoint: str | None = _setting("ENDPOINT", "S3 endpoint URL for S3-compatible storage (path-style addressing).")
    access_key_id: str | None = _setting("ACCESS_KEY_ID", "S3 access key id (else boto3's standard chain).")
    secret_access_key: str | None = _setting("SECRET_ACCESS_KEY", "S3 secret access key.", secret=True)
    region: str | None = _setting("REGION", "S3 region.")
    role_arn: str | None = _setting("ROLE_ARN", "IAM role to assume via STS on top of the resolved credentials.")
    anonymous: bool = _setting("ANONYMOUS", "Unsigned S3 requests, for public buckets.", BOOL, default=False)
    request_payer: str | None = _setting(
        "REQUEST_PAYER", "'requester': agree to pay for requests to a Requester Pays bucket.", REQUESTER
    )
    metadata_loc: str | None = _setting("METADATA_LOC", "Iceberg table metadata JSON (s3://... or a local path).")
    cluster_size: int | None = _setting("CLUSTER_SIZE", "Data nodes + 1, as Kubeflow sends it.", POSITIVE_INT)
    num_data_nodes: int | None = _setting("NUM_DATA_NODES", "Number of data nodes (at least 2).", POSITIVE_INT)
    iam_role: str | None = _setting("IAM_ROLE", "IAM role to assume for reading the Iceberg table.")
    head_cpu: str | None = _setting("HEAD_CPU", "Accepted from Kubeflow and recorded; not needed.")
    head_mem: str | None = _setting("HEAD_MEM", "Accepted from Kubeflow and recorded; not needed.")
    worker_cpu: str | None = _setting("WORKER_CPU", "Accepted from Kubeflow and recorded; not needed.")
    worker_mem: str | None = _setting("WORKER_MEM", "Accepted from Kubeflow and recorded; not needed.")
    train_job_name: str | None = _setting("TRAIN_JOB_NAME", "Accepted from Kubeflow and recorded; not needed.")
    cache_image: str | None = _setting("CACHE_IMAGE", "Accepted from Kubeflow and recorded; not needed.")
    readiness_initial_delay_seconds: str | None = _setting(
        "READINESS_INITIAL_DELAY_SECONDS", "Accepted from Kubeflow and recorded; not needed."
    )
    readiness_period_seconds: str | None = _setting(
        "READINESS_PERIOD_SECONDS", "Accepted from Kubeflow and recorded; not needed."
    )
    readiness_timeout_seconds: str | None = _setting(
        "READINESS_TIMEOUT_SECONDS", "Accepted from Kubeflow and recorded; not needed."
    )
    readiness_failure_threshold: str | None = _setting(
        "READINESS_FAILURE_THRESHOLD", "Accepted from Kubeflow and recorded; not needed."
    )
    max_workers: int | None = _setting(
        "MAX_WORKERS",
        "Most parallel transfers, at most 256 [default: per source, S3 and Hub: 64, from 8 streams up while it "
        "pays; small files 64 at once, more up to the cap while round trips dominate].",
        WORKERS,
    )
    read_timeout: float = _setting(
        "READ_TIMEOUT",
        f"Seconds without a byte before a request is abandoned and retried [default: {DEFAULT_READ_TIMEOUT:g}], and "
        "for each 64 KiB of an answer, so a trickle is abandoned too; falls back to HF_HUB_DOWNLOAD_TIMEOUT.",
        POSITIVE_NUMBER,
        default=DEFAULT_READ_TIMEOUT,
        fallback_env=("HF_HUB_DOWNLOAD_TIMEOUT",),
    )
    shard_index: int | None = _setting(
        "SHARD_INDEX",
        "This initializer's share, 0 .. SHARD_COUNT-1, of a plan split over SHARD_COUNT initializers writing one "
        "OUTPUT_PATH; for cache://, the one shard (of NUM_DATA_NODES) this node materialises.",
        NON_NEGATIVE_INT,
    )
    shard_count: int | None = _setting(
        "SHARD_COUNT",
        "How many initializers split the plan (hf://, s3://); with it, JOB_COMPLETION_INDEX stands in for an unset "
        "SHARD_INDEX.",
        POSITIVE_INT,
    )
    job_completion_index: int | None = _setting(
        "JOB_COMPLETION_INDEX",
        "Set by Kubernetes in an Indexed Job's pods: the shard index when SHARD_COUNT is set and SHARD_INDEX is not.",
        NON_NEGATIVE_INT,
    )
    verify: bool = _setting(
        "VERIFY",
        "Re-hash files an earlier run completed against the source's checksums, and fetch again those that differ.",
        BOOL,
        default=False,
    )
    dry_run: bool = _setting(
        "DRY_RUN",
        "List and plan as a run would, print the plan (path and size of each file, totals; JSON lines when stdout is "
        "not a terminal) and exit 0, writing nothing under OUTPUT_PATH.",
        BOOL,
        default=False,
    )
    max_bandwidth: int | None = _setting(
        "MAX_BANDWIDTH",
        "Most bytes per second the whole run reads, all connections together (hf, s3): 50M is 50 MiB/s, as rclone's "
        "--bwlimit (K, M, G, T are binary multiples) [default: no cap].",
        BANDWIDTH,
    )
    timeout: float | None = _setting(
        "TIMEOUT", "Overall deadline in seconds; past it the run stops with exit 1 [default: none].", POSITIVE_NUMBER
    )
    progress_interval: float | None = _setting(
        "PROGRESS_INTERVAL", "Seconds between progress events [default: 5].", POSITIVE_NUMBER
    )
    log_format: str | None = _setting(
        "LOG_FORMAT", "json or console [default: console on a terminal, else json].", LOG_FORMAT
    )
    log_level: str | None = _setting("LOG_LEVEL", "debug, info, warning or error [default: info].", LOG_LEVEL)

    @staticmethod
    def typo_hints(env: Mapping[str, str]) -> dict[str, str]:
        """Variables that are not part of the contract but look like a misspelling of one: {given: meant}."""
        known = {name for _, s in Config.settings() for name in (s.env, *s.fallback_env)}
        hints = {}
        for name in env:
            if name in known or not name.isupper() or name.startswith(_FOREIGN_PREFIXES):
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
            if close:
                hints[name] = close[0]
        return hints

    @staticmethod
    def settings() -> list[tuple[str, Setting]]:
        """(field name, setting) for every variable of the contract, in declaration order."""
        return settings_of(Config)

    @classmethod
    def from_env(cls, env: Mapping[str, str], options: Mapping[str, str | None] | None = None) -> Config:
        """Parse the contract from variables and raw option values; an option given wins over its variable."""
        return cls(**parse_settings(cls.settings(), env, options))

    def to_env(self) -> dict[str, str]:
        """The variables that reproduce this configuration: `Config.from_env(c.to_env()) == c`."""
        env: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and value != f.default:
                env[f.metadata["setting"].env] = f.metadata["setting"].codec.format(value)
        return env

    def secrets(self) -> list[str]:
        """Secret values present in this configuration, for log redaction."""
        return [getattr(self, name) for name, s in self.settings() if s.secret and getattr(self, name)]

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

    def require_storage_uri(self) -> str:
        if not self.storage_uri:
            raise ConfigError("STORAGE_URI is not set: give the source as hf://..., s3://... or cache://...")
        return self.storage_uri
