"""botocore's session internals: the one way to put refreshing credentials of our own in front of its chain."""

from __future__ import annotations

from typing import Any

from initializers.adapters import require

#: The releases this was read against; pyproject.toml pins the same range.
AT_LEAST, BELOW = "1.34", "2"
require("botocore", AT_LEAST, BELOW)


def set_credentials(session: Any, credentials: Any) -> None:
    """Make `credentials` the session's, as its own credential providers would (botocore has no public setter)."""
    session._credentials = credentials
