"""Moving bytes, written once for every source: the engine (parallel tasks into temporaries, verify, rename), its task
factories (ranges of stored files, groups of made files; `factories` picks one by what the source is), the lane (small
files, many requests in flight from one thread), how many transfers and how large a range (`concurrency`), the
bandwidth cap, verification (`checksums`), progress.

May import `common`, `store` and `destination`; it knows sources only by the store contract (`store.contract`: a
`Storage` or a `Maker`).
"""
