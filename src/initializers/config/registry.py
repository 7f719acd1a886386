"""The source registry: each source declares itself here (its scheme and the form of its URIs, the programs that
accept it, its option groups, how its URI is checked, how it is opened), and the contract, the run and the SDK builder
read it, never a source's modules by name: a program accepts the schemes registered for it (`schemes_of`), so a new
source edits no central list.

A source registers from its package's `__init__` (`initializers.sources` imports them all, as rclone's
`backend/all` does); opening one imports its modules only then, so a model download never loads the cache
source's pyarrow. Registration refuses a scheme declared twice and a variable or field name two groups would share:
the schema is one flat set of variables, and two settings of one name would silently read the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from initializers.config.settings import Setting, settings_of


@dataclass(frozen=True)
class Claim:
    """URIs of other schemes a source takes as its own (the Hub: the address of a Hub page, pasted from a browser)."""

    #: The schemes of the URIs it may take (the others of these schemes are refused naming what it takes).
    schemes: tuple[str, ...]
    #: What it takes, in words, for --help and messages.
    usage: str
    #: Whether it takes `uri`.
    takes: Callable[[str], bool]


@dataclass(frozen=True)
class SourcePlugin:
    """One source, as the core knows it."""

    scheme: str
    #: The form of its URIs, for --help and messages: `s3://BUCKET[/PREFIX]`.
    usage: str
    #: The option groups (schemas declared beside the source) it reads, besides the shared settings.
    options: tuple[type, ...]
    #: Checks a URI it takes (of its scheme, or one it `claims`) for a program's kind and returns its parsed location,
    #: whose `place` names what is fetched whatever its version; raises ConfigError naming STORAGE_URI.
    locate: Callable[[str, Any], Any]
    #: Imports the source's modules and opens it: (uri, config holding only its own option groups, kind).
    open: Callable[..., Any]
    #: The programs that accept it, by their kind's name (`Kind.name`): both unless it says otherwise.
    kinds: tuple[str, ...] = ("dataset", "model")
    #: True when a run splits the plan over SHARD_COUNT initializers; False when the source shards by itself.
    splits_plan: bool = True
    #: Shared settings (field names) that mean nothing for this source, and why: refused when given.
    refuses: Mapping[str, str] = field(default_factory=dict)
    #: What a shared setting (field name) means for this source, a sentence added to its --help.
    notes: Mapping[str, str] = field(default_factory=dict)
    #: Variables it reads that have no option of ours (its libraries' own), for `--help`.
    also_reads: tuple[str, ...] = ()
    #: URIs of another scheme it takes as its own.
    claim: Claim | None = None

    def claims(self, uri: str) -> bool:
        """Whether it takes `uri`, of another scheme, as its own."""
        return self.claim is not None and self.claim.takes(uri)


_PLUGINS: dict[str, SourcePlugin] = {}
#: Option groups by type, in registration order (a group two sources read, such as S3 access, appears once).
_GROUPS: dict[type, None] = {}


def register(plugin: SourcePlugin, shared: list[tuple[str, Setting]]) -> None:
    """Add `plugin`; `shared`: the contract's own settings, whose names no group may reuse."""
    if plugin.scheme in _PLUGINS:
        raise RuntimeError(f"the scheme {plugin.scheme}:// is registered twice")
    if not plugin.kinds:
        raise RuntimeError(f"the scheme {plugin.scheme}:// is registered for no program")
    new_groups = [group for group in plugin.options if group not in _GROUPS]
    taken = shared + [setting for group in _GROUPS for setting in settings_of(group)]
    _check_unique(taken + [setting for group in new_groups for setting in settings_of(group)])
    _PLUGINS[plugin.scheme] = plugin
    _GROUPS.update(dict.fromkeys(new_groups))


def _check_unique(settings: list[tuple[str, Setting]]) -> None:
    fields: set[str] = set()
    variables: set[str] = set()
    for name, setting in settings:
        for variable in (setting.env, *setting.fallback_env):
            if variable in variables:
                raise RuntimeError(f"the variable {variable} is declared by two settings")
            variables.add(variable)
        if name in fields:
            raise RuntimeError(f"the setting field {name!r} is declared twice: values are built by field name")
        fields.add(name)


def plugin(scheme: str) -> SourcePlugin:
    """The source registered for `scheme` (which `uris.scheme_of` has checked against the program's kind, or found
    a source that claims the URI)."""
    return _PLUGINS[scheme]


def schemes() -> tuple[str, ...]:
    """Every registered scheme, in registration order (the conformance suite runs one store per scheme)."""
    return tuple(_PLUGINS)


def schemes_of(kind: str) -> tuple[str, ...]:
    """The schemes of the sources registered for the `kind` program (a `Kind`'s name), in registration order: the
    order its messages and --help list them in."""
    if not _PLUGINS:
        raise RuntimeError("no source is registered: import initializers.sources first")
    return tuple(scheme for scheme, plugin in _PLUGINS.items() if kind in plugin.kinds)


def plugins_for(schemes: Iterable[str]) -> list[SourcePlugin]:
    """The registered sources of `schemes` (a program's), in registration order."""
    wanted = set(schemes)
    return [plugin for scheme, plugin in _PLUGINS.items() if scheme in wanted]


def option_groups() -> tuple[type, ...]:
    """Every registered source's option groups, each once."""
    if not _PLUGINS:
        raise RuntimeError("no source is registered: import initializers.sources first")
    return tuple(_GROUPS)
