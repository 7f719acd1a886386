"""The SDK side: Kubeflow-compatible initializer configurations, turned into exactly the env the Kubeflow SDK builds.

The Kubeflow SDK's five classes keep its names, fields and defaults (0.5.0), plus `allow_patterns` (ALLOW_PATTERNS,
which it lacks) and SIGNATURE's settings where their store reads them; every other store's class is ours alone, made
from the store's plug-in (`STEPS`). They convert to the programs' own `Config`, so the variables they produce are
written by the schema the programs read: the two sides cannot drift apart. They validate with the programs' own parsers,
more than the Kubeflow SDK does, so a URI the programs would reject fails here, early, with the same message."""

from __future__ import annotations

import operator
import types
from dataclasses import dataclass, field, fields, make_dataclass
from functools import partial, reduce
from typing import Any, ClassVar

from initializers.common.errors import ConfigError
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.config.settings import checked_value
from initializers.config.signing import SigningOptions
from initializers.config.uris import scheme_of
from initializers.sources import DATASET, MODEL

DEFAULT_DATASET_IMAGE = "ghcr.io/initializers/dataset-initializer:latest"
DEFAULT_MODEL_IMAGE = "ghcr.io/initializers/model-initializer:latest"
WORKSPACE = "/workspace"


@dataclass
class _InitializerConfig:
    """What every initializer configuration shares: its kind, scheme and the way to the programs' `Config`. Each class
    has the Kubeflow SDK's fields first, in its order; fields it lacks (`allow_patterns`) come after them, keyword-only,
    so positional arguments written for the Kubeflow SDK land in the same fields here."""

    storage_uri: str
    kind: ClassVar[Kind]
    scheme: ClassVar[str]

    def __init_subclass__(cls, *, kind: Kind, scheme: str, **kwargs: Any) -> None:
        """Each configuration names its kind and scheme where it is declared: `class X(..., kind=, scheme=)`."""
        super().__init_subclass__(**kwargs)
        cls.kind, cls.scheme = kind, scheme

    def __post_init__(self) -> None:
        for name, setting in Config.settings(self.kind):
            value = getattr(self, name, None)
            # As the programs read values: one trailing newline dropped, any other control character refused.
            if isinstance(value, str):
                setattr(self, name, checked_value(value, setting.env, setting.secret))
            elif isinstance(value, list):
                setattr(self, name, [checked_value(item, setting.env, setting.secret) for item in value])
        if scheme_of(self.storage_uri, self.kind) != self.scheme:
            raise ConfigError(
                f"STORAGE_URI: {type(self).__name__} takes {self.scheme}:// URIs only, got {self.storage_uri!r}"
            )
        self.kind.plugin(self.scheme).locate(self.storage_uri, self.kind)
        # Refuses what the variables cannot carry (a pattern with a comma), and what the programs would not parse back
        # (a SIGNATURE that is no choice).
        Config.from_env(self.to_config().to_env(), kind=self.kind)

    def to_config(self, output_path: str | None = None) -> Config:
        """The same configuration as the programs will parse it back from the environment."""
        return Config.build({**self._values(), "output_path": output_path}, self.kind)

    def _values(self) -> dict[str, Any]:
        """{setting field: value} of the fields this configuration shares with the programs' schema, lists as tuples."""
        own = {name for name, _ in Config.settings(self.kind)}
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name in own}
        return {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}


def _keyword_fields(name: str, groups: tuple[type, ...]) -> type:
    """A mixin of the option groups' settings as keyword-only fields, with the schema's names and defaults."""
    settings = [field_ for group in groups for field_ in fields(group)]
    return make_dataclass(name, [(f.name, f.type, field(default=f.default, kw_only=True)) for f in settings])


#: SIGNATURE's settings (the Kubeflow SDK has none of them): the hf and s3 configurations take them as the programs do.
_Signing = _keyword_fields("_Signing", (SigningOptions,))


@dataclass
class HuggingFaceDatasetInitializer(_InitializerConfig, _Signing, kind=DATASET, scheme="hf"):
    ignore_patterns: list[str] | None = None
    access_token: str | None = None
    allow_patterns: list[str] | None = field(default=None, kw_only=True)  # the Kubeflow SDK has no allow list


@dataclass
class S3DatasetInitializer(_InitializerConfig, _Signing, kind=DATASET, scheme="s3"):
    ignore_patterns: list[str] | None = None
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None
    role_arn: str | None = None
    allow_patterns: list[str] | None = field(default=None, kw_only=True)  # the Kubeflow SDK has no allow list


@dataclass
class DataCacheInitializer(_InitializerConfig, kind=DATASET, scheme="cache"):
    metadata_loc: str
    num_data_nodes: int
    head_cpu: str | None = None
    head_mem: str | None = None
    worker_cpu: str | None = None
    worker_mem: str | None = None
    iam_role: str | None = None

    def __post_init__(self) -> None:
        if self.num_data_nodes <= 1:
            raise ConfigError(f"NUM_DATA_NODES: must be greater than 1, got {self.num_data_nodes}")
        super().__post_init__()

    def _values(self) -> dict[str, Any]:
        """Kubeflow sends the cluster size (data nodes + 1), not the number of data nodes."""
        return {**super()._values(), "cluster_size": self.num_data_nodes + 1, "num_data_nodes": None}


@dataclass
class HuggingFaceModelInitializer(_InitializerConfig, _Signing, kind=MODEL, scheme="hf"):
    ignore_patterns: list[str] | None = field(default_factory=partial(list, MODEL.default_ignore_patterns))
    access_token: str | None = None
    allow_patterns: list[str] | None = field(default=None, kw_only=True)  # replaces the model default's allow list


@dataclass
class S3ModelInitializer(_InitializerConfig, _Signing, kind=MODEL, scheme="s3"):
    ignore_patterns: list[str] | None = field(default_factory=partial(list, MODEL.default_ignore_patterns))
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None
    role_arn: str | None = None
    allow_patterns: list[str] | None = field(default=None, kw_only=True)  # replaces the model default's allow list


#: The Kubeflow SDK's own classes, with its fields in its order.
_KUBEFLOW = (
    HuggingFaceDatasetInitializer, S3DatasetInitializer, DataCacheInitializer, HuggingFaceModelInitializer,
    S3ModelInitializer,
)  # fmt: skip


def _ours(plugin: SourcePlugin, kind: Kind) -> type[_InitializerConfig]:
    """The `kind` program's configuration for a store the Kubeflow SDK has none for (`GcsDatasetInitializer`):
    `storage_uri` and `ignore_patterns` (with the program's default) as Kubeflow's have them, then, keyword-only,
    `allow_patterns` and every setting of the store's option groups, as its plug-in declares them."""
    name = f"{plugin.sdk_name or plugin.scheme.capitalize()}{kind.name.capitalize()}Initializer"
    settings = _keyword_fields(f"_{name}Settings", plugin.options)
    ignore = (
        field(default_factory=partial(list, kind.default_ignore_patterns)) if kind.default_ignore_patterns else None
    )

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(
            __module__=__name__,
            __doc__=f"Ours alone: the Kubeflow SDK has no {plugin.scheme}:// initializer. The source's settings are "
            f"keyword fields: {', '.join(f.name for f in fields(settings))}.",
            __annotations__={"ignore_patterns": "list[str] | None", "allow_patterns": "list[str] | None"},
            ignore_patterns=ignore,
            allow_patterns=field(default=None, kw_only=True),
        )

    bases = (_InitializerConfig, settings)
    return dataclass(types.new_class(name, bases, {"kind": kind, "scheme": plugin.scheme}, body))


#: Every step's configuration, a program's after another, its stores in the programs' order (see the module).
STEPS: tuple[type[_InitializerConfig], ...] = tuple(
    next((own for own in _KUBEFLOW if own.kind is kind and own.scheme == plugin.scheme), None) or _ours(plugin, kind)
    for kind in (DATASET, MODEL)
    for plugin in kind.plugins
)
globals().update({step.__name__: step for step in STEPS if step not in _KUBEFLOW})
DatasetInitializer = reduce(operator.or_, [step for step in STEPS if step.kind is DATASET])
ModelInitializer = reduce(operator.or_, [step for step in STEPS if step.kind is MODEL])


@dataclass
class Initializer:
    dataset: DatasetInitializer | None = None
    model: ModelInitializer | None = None


@dataclass
class ContainerBackendConfig:
    """The three settings of the Kubeflow SDK's container backend that concern initializers."""

    dataset_initializer_image: str = DEFAULT_DATASET_IMAGE
    model_initializer_image: str = DEFAULT_MODEL_IMAGE
    initializer_timeout: int = 600

    def image_for(self, initializer: DatasetInitializer | ModelInitializer) -> str:
        return self.dataset_initializer_image if initializer.kind is DATASET else self.model_initializer_image


def container_env(initializer: DatasetInitializer | ModelInitializer) -> dict[str, str]:
    """The env the Kubeflow SDK's container backend gives the image (it has no cache initializer)."""
    if isinstance(initializer, DataCacheInitializer):
        raise ConfigError("the container backend runs no DataCacheInitializer: it needs a Kubernetes cluster")
    return program_env(initializer)


def program_env(initializer: DatasetInitializer | ModelInitializer) -> dict[str, str]:
    """The env one program needs, for any initializer: the container backend's, and for the cache initializer
    the Kubernetes backend's (with STORAGE_URI and OUTPUT_PATH), since our images read the table themselves."""
    return initializer.to_config(initializer.kind.default_output_path).to_env()


def kubernetes_env(initializer: DatasetInitializer | ModelInitializer) -> dict[str, str]:
    """The env the Kubeflow SDK puts in a TrainJob's initializer; STORAGE_URI travels as `storageUri` beside it."""
    env = initializer.to_config().to_env()
    del env["STORAGE_URI"]
    return env


def shard_variables(index: int, count: int) -> dict[str, str]:
    """SHARD_INDEX and SHARD_COUNT for share `index` of `count`, written and checked by the programs' own schema."""
    config = Config(shard_index=index, shard_count=count)
    config.shard()
    return config.to_env()
