"""The hf:// source: the Hub's listing through huggingface_hub, the resolve GETs (`get`), the token's guard (`guard`),
and the source (`source`). This face declares it (`PLUGIN`); huggingface_hub is imported when an hf:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.contract import Config, Kind
from initializers.config.registry import Claim, SourcePlugin
from initializers.config.signing import SigningOptions
from initializers.sources.hub.location import HfLocation, is_hub_page
from initializers.sources.hub.options import HubOptions


def _open(uri: str, config: Config, kind: Kind) -> Any:
    from initializers.sources.hub.source import HfSource

    return HfSource.from_config(uri, config, kind)


#: huggingface_hub's own (its older token variable and the token file `hf auth login` saves among them), and the CA
#: certificates its client and our downloads read.
_ALSO_READS = ("HF_ENDPOINT", "HF_HUB_DOWNLOAD_TIMEOUT", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME",
               "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip

#: A Hub page's address, pasted from a browser (`is_hub_page` names the hosts).
_PAGES = Claim(
    ("http", "https"),
    "a Hub page's address (https://huggingface.co/..., https://hf.co/... or on HF_ENDPOINT's host)",
    is_hub_page,
)

#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "hf",
    "hf://OWNER/NAME[@REVISION][/PATH]",
    (HubOptions, SigningOptions),
    HfLocation.parse,
    _open,
    also_reads=_ALSO_READS,
    claim=_PAGES,
)
