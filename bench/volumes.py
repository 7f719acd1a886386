"""Where outputs land: tmpfs (the committed loopback figures), or ext4 on a loop device, as a PVC on a disk is."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def ext4(size_gb: int) -> Iterator[Path]:
    """A fresh ext4 filesystem of `size_gb` GiB (sparse, in /var/tmp), mounted for the duration; needs root."""
    image = Path(tempfile.mkstemp(prefix="bench-ext4-", suffix=".img", dir="/var/tmp")[1])
    mount = Path(tempfile.mkdtemp(prefix="bench-ext4-"))
    try:
        subprocess.run(["truncate", "-s", f"{size_gb}G", str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=False)
    finally:
        image.unlink(missing_ok=True)
        mount.rmdir()
