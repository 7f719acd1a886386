"""Sources as plug-ins, each written against the store contract (`initializers.store`): one sub-package per source
(`s3`, `hub`, `iceberg`) and the HTTP client they share (`http`). Importing this package registers every source
(`config.registry`): each sub-package's face declares its scheme, the programs it serves, its options and opener, and
imports nothing heavy. They register in the order the programs list their schemes: hub (hf://), then s3 (imported by
iceberg before it registers), then iceberg (cache://).

May import `common`, `store`, `adapters`, `config` and `cache`, never the engine (`transfer`); a source's modules are
imported only when its scheme is used.
"""

from __future__ import annotations

from initializers.sources import hub, iceberg, s3

__all__ = ["hub", "iceberg", "s3"]
