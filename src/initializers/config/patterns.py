"""Path patterns: fnmatch globs matched against paths relative to the source root, the same for every source."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable


class Globs:
    """A compiled list of globs. `*` also crosses `/` (as in huggingface_hub); `dir/` means `dir/*`."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        expanded = [p + "*" if p.endswith("/") else p for p in self.patterns]
        self._regex = re.compile("|".join(fnmatch.translate(p) for p in expanded)) if expanded else None

    def match(self, relative_path: str) -> bool:
        return self._regex is not None and self._regex.match(relative_path) is not None

    def __bool__(self) -> bool:
        return bool(self.patterns)
