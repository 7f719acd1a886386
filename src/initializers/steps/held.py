"""What OUTPUT_PATH already holds, settled before anything is fetched: another source's files (its manifest says
so) are refused, as the two would mix, or removed with REPLACE_EXISTING."""

from __future__ import annotations

from typing import Any

from initializers.common.errors import ConfigError
from initializers.config.contract import Config, Kind
from initializers.config.uris import scheme_of
from initializers.destination.state import StateDir


def settle_another_source(config: Config, kind: Kind, log: Any, uri: str, state: StateDir) -> None:
    """Refuse to fetch `uri` into an OUTPUT_PATH that holds another source (another program, or another place,
    whatever the version); with REPLACE_EXISTING, remove that source's files first."""
    held = state.held_source()
    if held is None or (held[0] == kind.program and _place(held[1].get("uri"), kind) == _place(uri, kind)):
        return
    if not config.replace_existing:
        held_uri, root = held[1].get("uri"), str(state.root)
        if held[0] == kind.program:  # another place
            mixed = (
                f"holds {held_uri} (fetched by the {held[0]}), as its manifest says; fetching {uri} into it would "
                "mix the two"
            )
        else:  # another program, whatever the place
            mixed = (
                f"holds {held_uri} as fetched by the {held[0]} (its manifest says so); the {kind.program} would mix "
                "its files with those"
            )
        raise ConfigError(
            f"OUTPUT_PATH {root!r} {mixed}: choose another OUTPUT_PATH, or set REPLACE_EXISTING=true to replace those "
            "files with these"
        )
    removed = state.remove_held_source()
    log.info("replaced another source", source=held[1].get("uri"), removed_files=removed)


def _place(uri: Any, kind: Kind) -> str | None:
    """What `uri` fetches, whatever its version (`SourcePlugin.locate`); None when it is not one of this program's."""
    if not isinstance(uri, str):
        return None
    try:
        location = kind.plugin(scheme_of(uri, kind)).locate(uri, kind)
        return str(getattr(location, "place", location))
    except ConfigError:
        return None
