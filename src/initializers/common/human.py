"""Sizes, rates, durations and counts as people read them (binary units, as `ls -h` and rclone print them): the live
view and the dry run's table say `1.5 GiB`, the structured logs keep exact numbers."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(count: float) -> str:
    """`count` bytes in the largest binary unit that keeps the number at least 1: `0 B`, `999 B`, `1.5 GiB`."""
    value, unit = float(count), 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def count(number: int, noun: str) -> str:
    """`1 file`, `1,234 files`: the noun takes an s unless there is exactly one."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def rate(bytes_per_second: float) -> str:
    return f"{size(bytes_per_second)}/s"


def duration(seconds: float) -> str:
    """`seconds` rounded to the second, in the two largest units that matter: `8s`, `2m05s`, `3h07m`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
