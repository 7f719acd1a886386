"""How large the ranges of a large file are: the storage's advised size, grown with the rate one connection achieves
(`concurrency.Ramp.part_size`); and which files come whole."""

from __future__ import annotations

#: The size of the ranges a large file is fetched in over capped connections, as AWS advises for parallel GETs (the
#: Hub's CDN is alike); faster connections get larger ones (`concurrency`).
PART_SIZE = 8 << 20
#: The largest range a fast connection gets: a file of a few hundred MB still spreads over several streams.
MAX_PART_SIZE = 32 << 20


def range_size(advised: int | None, measured: int) -> int | None:
    """The size of the next range of a large file: the storage's advised size, grown to the size one connection's
    `measured` rate calls for (`Ramp.part_size`); None: the storage takes whole files only.

    Asked per file and per range: connections speed up, and a source may learn late whether its server takes ranges.
    """
    return max(advised, measured) if advised else None


def comes_whole(size: int, part: int | None) -> bool:
    """A file of up to two parts comes in one request: splitting it would save at most one part's time and lose the
    check of its checksum as it streams in."""
    return not part or size <= 2 * part
