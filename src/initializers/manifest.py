"""The completion manifest: what was fetched, from which version, how verified. Its presence means complete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from initializers import __version__
from initializers.contract import Kind
from initializers.plan import RemoteFile
from initializers.state import DoneFile

FORMAT = 1


def build(
    kind: Kind,
    source: dict[str, Any],
    plan: list[RemoteFile],
    done: dict[str, DoneFile],
    ignore_patterns: tuple[str, ...],
    started_at: datetime,
    finished_at: datetime,
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "tool": {"name": kind.program, "version": __version__},
        "source": source,
        "ignore_patterns": list(ignore_patterns),
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "total_files": len(plan),
        "total_bytes": sum(done[f.path].size for f in plan),
        "files": [_entry(file, done[file.path]) for file in plan],
    }


def _entry(file: RemoteFile, done: DoneFile) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": file.path, "size": done.size, "version": file.version, "mtime_ns": done.mtime_ns}
    if file.checksum is not None:
        entry["checksum"] = {"algorithm": file.checksum.algorithm, "hexdigest": file.checksum.hexdigest}
    return entry


def describes(manifest: dict[str, Any] | None, source: dict[str, Any], plan: list[RemoteFile]) -> bool:
    """True when an existing manifest already claims exactly this source and these file versions."""
    if not manifest or manifest.get("format") != FORMAT or manifest.get("source") != source:
        return False
    recorded = {e.get("path"): e for e in manifest.get("files", [])}
    return len(recorded) == len(plan) and all(
        f.path in recorded and f.matches(recorded[f.path].get("size"), recorded[f.path].get("version")) for f in plan
    )
