"""Opening the source STORAGE_URI names, through the program's store plug-ins, and the plan it lists: selected, made
safe, registered, and cut to this run's share of a split plan."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, cast

from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.config.uris import scheme_of
from initializers.plan import shares
from initializers.plan.index import PlanIndex
from initializers.plan.safe_paths import plan_files
from initializers.plan.selection import Selected, Selection
from initializers.process.stopping import Stop
from initializers.sources.http.http1 import Proxy
from initializers.store.contract import Source


def plugin_of(config: Config, kind: Kind) -> SourcePlugin:
    """The store STORAGE_URI names, of those this program accepts."""
    return kind.plugin(scheme_of(config.require_storage_uri(kind), kind))


def open_source(config: Config, kind: Kind, stop: Stop) -> Source:
    """The source STORAGE_URI names, given only its own options. A stop interrupts the opening: the
    source's library may wait on the network (credentials, a region, a revision)."""
    plugin = plugin_of(config, kind)
    Proxy.check_environment()  # one rule for every source, before any client library reads the variables
    with stop.interruptible():
        return cast(Source, plugin.open(config.require_storage_uri(kind), config.for_source(plugin), kind))


def plan_share(config: Config, kind: Kind) -> tuple[int, int] | None:
    """The share (index, count) of a plan split over several initializers that this run fetches; None when not
    split, or when the source shards by itself (the cache source's SHARD_INDEX)."""
    return config.shard() if plugin_of(config, kind).splits_plan else None


def selection_for(config: Config, kind: Kind, log: Any, signing: SigningOptions | None) -> Selection:
    """The run's rules; with `signing`, they keep its signature file and note what they leave out (see `Selection`)."""
    return Selection(config, kind, log, keep=signing.relative_path() if signing else None)


def planned(
    source: Source, selection: Selection, index: PlanIndex, share: tuple[int, int] | None, log: Any
) -> Generator[list[RemoteFile], None, Selected]:
    """This run's files, in batches: the listing selected, checked and registered in `index`; of a split plan,
    this share's part. Returns what the selection found."""
    files = plan_files(selection.filter(source.list_files()), source.describe()["uri"], index.plan)
    return files if share is None else shares.own_share(files, index, share, log)
