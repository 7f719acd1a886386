"""The gs:// source: Google Cloud Storage through its JSON API (`bucket`), with tokens from google-auth (`access`),
and the source itself (`source`). This face declares it (`PLUGIN`); google-auth is imported when a gs:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.sources.gcs.location import GcsLocation
from initializers.sources.gcs.options import GOOGLE_AUTH_VARIABLES, GcsOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.gcs.source import GcsSource

    return GcsSource.from_config(uri, config)


#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "gs",
    GcsLocation.USAGE,
    (GcsOptions, AnonymousAccess, SigningOptions),
    lambda uri, _kind: GcsLocation.parse(uri),
    _open,
    also_reads=(*GOOGLE_AUTH_VARIABLES, "SSL_CERT_FILE", "SSL_CERT_DIR"),
    sdk_name="Gcs",
)
