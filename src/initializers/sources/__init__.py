"""Sources as plug-ins: the contracts they fulfil (`base`), one sub-package per source (`s3`, `hub`, `iceberg`)
and the HTTP client they share (`http`); each source declares its scheme, options and constructor in the registry.

May import `common`, `adapters`, `config`, `cache` and `transfer`; a source's modules are imported only when its
scheme is used.
"""
