"""Sizes, rates, durations and counts as people read them. Sizes and rates are in decimal units (`1.5 GB`,
`2.0 MB/s`, as `du --si` and the Hub's file lists print them): the unit family of the logs' `mb_s` and `rate_mb_s`,
so a live view's rate and the `done` line's read alike on one terminal. The structured logs keep exact numbers."""

from __future__ import annotations

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_STEP = 1000


def size(count: float) -> str:
    """`count` bytes in the largest decimal unit that keeps the number at least 1: `0 B`, `999 B`, `1.5 GB`; the
    number shown is below 1000 (`999.96 kB` is `1.0 MB`), so a size is at most 8 characters below a petabyte."""
    if abs(count) < _STEP:
        return f"{int(count)} B"
    value, unit = float(count), 0
    while unit < len(_UNITS) - 1 and abs(round(value, 1)) >= _STEP:
        value, unit = value / _STEP, unit + 1
    return f"{value:.1f} {_UNITS[unit]}"


def count(number: int, noun: str) -> str:
    """`1 file`, `1,234 files`: the noun takes an s unless there is exactly one."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def rate(bytes_per_second: float) -> str:
    """`2.0 MB/s`: a `size` per second."""
    return f"{size(bytes_per_second)}/s"


def duration(seconds: float) -> str:
    """`seconds` rounded to the second, in the two largest units that matter: `8s`, `2m05s`, `3h07m`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
