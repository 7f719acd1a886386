"""The https:// source: one file on any web server, by its URL (`location`), read by `source` through `server`. It
takes http:// URLs as its own too (plain HTTP, warned of), and only the URLs no other store claims: by the registry's
rule (`config.registry`), a Hub page or an Azure blob address goes to its own store, wherever each stands in `STORES`.
This face declares it (`PLUGIN`); the rest is imported when such a URL is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.sources.web.location import WebLocation
from initializers.sources.web.options import WebOptions


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.web.source import WebSource

    return WebSource.from_config(uri, config)


#: The store, for the composition root (`initializers.sources.STORES`). No SigningOptions: a URL names one file, never
#: the signature a publisher puts beside a model's files.
PLUGIN = SourcePlugin(
    "https",
    WebLocation.USAGE,
    (WebOptions,),
    lambda uri, _kind: WebLocation.parse(uri),
    _open,
    also_reads=("SSL_CERT_FILE", "SSL_CERT_DIR"),
    also_schemes=("http",),
    sdk_name="Web",
    signed_urls=True,
)
