"""Page-cache costs as a user's node has them, on a virtual machine that hands freed memory back to its host.

Some hypervisors (here: virtio-balloon free page reporting) take back the guest's free pages within a second of
their release. The next write into the page cache then faults on the host for every page it touches, which costs
a writer several times the page cache's own price, inside the kernel's per-file lock. Each benchmark round starts
by deleting the last round's output, so whether a contender writes into reclaimed pages or reused ones is a coin
flip that dwarfs the differences between tools, while a ceiling that discards its bytes never pays. Most nodes
users run on (bare metal, cloud VMs without ballooning) keep their freed pages, so the benchmarks hold the
reporting off while they run, and say so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_REPORTING = Path("/sys/module/page_reporting/parameters")
#: Above the buddy allocator's largest order (10 on x86-64): no free block is ever large enough to be reported.
_NEVER_REPORTED_ORDER = "11"
#: Written once and deleted before the first round, so that the first contender too writes into pages the
#: hypervisor has already backed: more than the largest output of one round.
_WARM_UP_BYTES = 2 << 30
_WHAT = (
    "this VM hands freed memory back to its host (free page reporting), so the pages a writer touches next fault "
    "on the host."
)


@contextlib.contextmanager
def as_on_a_node(scratch: Path) -> Iterator[str]:
    """Free page reporting held off (restored on exit) and memory backed for the run; yields the sentence the
    results give about it ("" where the machine has no such reporting)."""
    order_file = _REPORTING / "page_reporting_order"
    if not order_file.exists():
        yield ""
        return
    before = order_file.read_text().strip()
    try:
        order_file.write_text(_NEVER_REPORTED_ORDER)
    except OSError as exc:
        yield f"{_WHAT} It could not be held off ({exc.strerror}): the writers' figures vary with it"
        return
    try:
        _warm_up(scratch)
        yield f"{_WHAT} It was held off for the run, as a node keeps its freed memory"
    finally:
        order_file.write_text(before)


def _warm_up(scratch: Path) -> None:
    block = bytes(1 << 20)
    path = scratch / "warm-up"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for offset in range(0, _WARM_UP_BYTES, len(block)):
            os.pwrite(fd, block, offset)
    finally:
        os.close(fd)
        path.unlink()
