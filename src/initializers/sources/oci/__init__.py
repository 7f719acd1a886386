"""The oci:// source: an artifact in any container registry (ORAS's, ModelPack's raw layers) over the distribution
API (`registry`), its manifest read (`manifests`), the credentials container tools read (`credentials`), and the
source (`source`). This face declares it (`PLUGIN`); its modules are imported when an oci:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.sources.oci.location import OciLocation
from initializers.sources.oci.options import AUTH_FILE_VARIABLES, OciOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.oci.source import OciSource

    return OciSource.from_config(uri, config)


#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "oci",
    OciLocation.USAGE,
    (OciOptions, AnonymousAccess, SigningOptions),
    lambda uri, _kind: OciLocation.parse(uri),
    _open,
    also_reads=(*AUTH_FILE_VARIABLES, "SSL_CERT_FILE", "SSL_CERT_DIR"),
    sdk_name="Oci",
)
