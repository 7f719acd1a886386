"""The az:// source: Azure Blob Storage, by `az://CONTAINER[/PREFIX]` or a container's URL (`location`), read by
`source` through `container` as `access` decides. This face declares it (`PLUGIN`); the rest is imported when an az://
URI is opened, azure-identity only when a token is needed.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import Claim, SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.sources.azure.location import AzureLocation, is_blob_url
from initializers.sources.azure.options import ENTRA_VARIABLES, AzureOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.azure.source import AzureSource

    return AzureSource.from_config(uri, config)


#: A container's URL, as KServe's storage initializer takes it.
_URLS = Claim(("https",), f"an Azure Blob Storage URL ({AzureLocation.URL_USAGE})", is_blob_url)

#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "az",
    AzureLocation.USAGE,
    (AzureOptions, AnonymousAccess, SigningOptions),
    lambda uri, _kind: AzureLocation.parse(uri),
    _open,
    also_reads=ENTRA_VARIABLES,
    claim=_URLS,
    sdk_name="Azure",
)
