"""Moving bytes, written once for every source: the engine (parallel tasks into temporaries, verify, rename), its task
factories (ranges of stored files, groups of made files), the lane (small files, many requests in flight from one
thread), how many transfers and how large a range (`concurrency`, `range_sizes`), the bandwidth cap, verification
(`checksums`), the one retry policy and the throttling it answers as a fleet (`throttle`), progress.

May import `common` and `destination`; it knows sources only by the narrow interfaces it declares (`Sink`,
`Reader`, `Exchange`, `Making`).
"""
