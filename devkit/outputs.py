"""What a run left under OUTPUT_PATH, as tests read it back: the files it delivered, and its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` but the initializer's own state, by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.relative_to(root).as_posix().startswith(".initializer/")
    }


def manifest(output: Path) -> dict[str, Any]:
    """The manifest a completed run wrote."""
    return json.loads((output / ".initializer" / "manifest.json").read_text())
