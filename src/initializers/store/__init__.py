"""The contract a store is written against, below the sources and the engine alike: what a store offers (a listing of
files with their sizes, versions and checksums, a ranged read into a `sink`, or files it makes itself; `contract`),
the reads it offers the lane (`lane`), the round trips its requests show (`round_trips`), the one rule for transient
failures and retries (`retry`) and the pacer its requests share while the server throttles them (`throttle`).

A source imports this package and `common`, never the engine's modules (`transfer`); the engine imports it to run a
source's files. May import `common` only.
"""
