"""Moving bytes, written once for every source: the engine and its task factories (`factories`), the lane, how many
transfers and how large a range (`concurrency`), the bandwidth cap, verification (`checksums`), progress.

May import `common`, `store` and `destination`; it knows sources only by `store.contract` (a `Storage` or a `Maker`).
"""
