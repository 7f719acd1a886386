"""The contract a store is written against, below the sources and the engine alike: what a store offers (`contract`,
`sink`, `hashers`, `lane`), the round trips its requests show (`round_trips`), the one retry rule (`retry`) and the
hold its requests share while the server throttles them (`throttle`).

A source imports this package and `common`, never `transfer`; the engine imports it to run a source's files. May
import `common` only.
"""
