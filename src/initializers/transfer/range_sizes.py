"""How large the ranges of a large file are: the storage's advised size (`store.contract.PART_SIZE`), grown with the
rate one connection achieves (`concurrency.Ramp.part_size`)."""

from __future__ import annotations

#: The largest range a fast connection gets: a file of a few hundred MB still spreads over several streams.
MAX_PART_SIZE = 32 << 20


def range_size(advised: int | None, measured: int) -> int | None:
    """The size of the next range of a large file: the storage's advised size, grown to the size one connection's
    `measured` rate calls for (`Ramp.part_size`); None: the storage takes whole files only.

    Asked per file and per range: connections speed up, and a source may learn late whether its server takes ranges.
    """
    return max(advised, measured) if advised else None
