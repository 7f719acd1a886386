"""Sources as plug-ins, each written against the store contract (`initializers.store`): one sub-package per source,
and the packages two of them share, which are no store: the HTTP client (`http`, every store's but the cache's) and
the AWS access (`aws`, S3's and the cache's). A plug-in imports no other plug-in's modules. Each store's face
declares its `PLUGIN` (`config.registry`: its scheme, the programs it serves, its options and opener) and imports
nothing heavy.

This face is the composition root: `STORES`, every store in the order the programs list them (--help, messages), and
the two programs made of them (`DATASET`, `MODEL`), which the command line, the run and the SDK builder are handed.
It sits here, the lowest floor that sees every store, so that every floor above (the steps, `kubeflow`) and the
programs read one tuple; adding a store is its folder, and its import and one entry below.

May import `common`, `store`, `adapters`, `config` and `cache`, never the engine (`transfer`); a source's modules are
imported only when its scheme is used.
"""

from __future__ import annotations

from initializers.config.contract import programs
from initializers.config.registry import SourcePlugin
from initializers.sources import azure, gcs, hub, iceberg, s3

#: Every store, in the programs' order (--help, messages).
STORES: tuple[SourcePlugin, ...] = (hub.PLUGIN, s3.PLUGIN, gcs.PLUGIN, azure.PLUGIN, iceberg.PLUGIN)
DATASET, MODEL = programs(STORES)
