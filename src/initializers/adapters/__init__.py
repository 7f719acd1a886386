"""Every call into a third-party library's private API, one small module per library.

Each module names the release range its calls were read against and checks the installed release at import, so
an upgrade past it fails at once, naming the library, rather than somewhere in the middle of a download.
"""

from __future__ import annotations

import re
from importlib.metadata import version

from initializers.common.errors import ConfigError


def release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: '0.12.0' -> (0, 12, 0); '1.44.8rc1' -> (1, 44, 8)."""
    match = re.match(r"\d+(\.\d+)*", text)
    return tuple(int(number) for number in match.group().split(".")) if match else ()


def require(distribution: str, at_least: str, below: str) -> None:
    """Refuse to run against a release of `distribution` outside [at_least, below)."""
    installed = version(distribution)
    if not release(at_least) <= release(installed) < release(below):
        raise ConfigError(
            f"{distribution} {installed} is installed, but this initializer calls its internals as of "
            f">={at_least},<{below}: install a release in that range"
        )
