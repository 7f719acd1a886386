"""pyarrow's allocator in our programs: the system's, unless the user chose one with ARROW_DEFAULT_MEMORY_POOL.

Its default (jemalloc) keeps freed memory around, so the system allocator peaks lower at the same speed, for the
cache source's parts and the cache server's streams alike. pyarrow reads the variable when it first allocates.
"""

from __future__ import annotations

import os


def prefer_system_allocator() -> None:
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
