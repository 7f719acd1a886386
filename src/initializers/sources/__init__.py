"""Sources as plug-ins on the store contract (`initializers.store`), one sub-package each, and two shared packages that
are no store: the HTTP client (`http`, every store's but the cache's) and the AWS access (`aws`, S3's and the cache's).
A plug-in imports no other's modules; its face declares its `PLUGIN` (`config.registry`) and imports nothing heavy.

This face is the composition root: `STORES`, in the programs' order (--help, messages), and the programs made of them
(`DATASET`, `MODEL`), handed to the command line, the run and the SDK builder. It is the lowest floor that sees every
store, so every floor above reads one tuple; adding a store is its folder, its import and one entry below. It may
import `common`, `store`, `adapters`, `config` and `cache`, never the engine (`transfer`); a source's modules are
imported only when its scheme is used.
"""

from __future__ import annotations

from initializers.config.contract import programs
from initializers.config.registry import SourcePlugin
from initializers.sources import azure, gcs, hub, iceberg, oci, s3, web

STORES: tuple[SourcePlugin, ...] = (
    hub.PLUGIN,
    s3.PLUGIN,
    gcs.PLUGIN,
    azure.PLUGIN,
    oci.PLUGIN,
    iceberg.PLUGIN,
    web.PLUGIN,
)
DATASET, MODEL = programs(STORES)
