"""Sources as plug-ins, each written against the store contract (`initializers.store`): one sub-package per source
(`s3`, `hub`, `gcs`, `azure`, `iceberg`), and the packages two of them share, which register nothing: the HTTP client
(`http`, every store's but the cache's) and the AWS access (`aws`, S3's and the cache's). A plug-in imports no other
plug-in's modules. Importing this package registers every source (`config.registry`): each sub-package's face
declares its scheme, the programs it serves, its options and opener, and imports nothing heavy. They register in the
order the programs list their schemes: hub (hf://), then s3, gcs (gs://), azure (az://), then iceberg (cache://).

May import `common`, `store`, `adapters`, `config` and `cache`, never the engine (`transfer`); a source's modules are
imported only when its scheme is used.
"""

from __future__ import annotations

from initializers.sources import hub, s3

# isort: split
from initializers.sources import gcs  # after s3: the programs list gs:// after s3://

# isort: split
from initializers.sources import azure  # after s3: the programs list az:// after s3://

# isort: split
from initializers.sources import iceberg  # registered after s3: the programs list cache:// last

__all__ = ["azure", "gcs", "hub", "iceberg", "s3"]
