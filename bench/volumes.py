"""Where outputs land: tmpfs (the committed loopback figures), or ext4 on a loop device, as a PVC on a disk is."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def ext4(size_gb: int) -> Iterator[Path]:
    """A fresh ext4 filesystem of `size_gb` GiB (sparse, in /var/tmp), mounted for the duration; needs root.

    The loop device does direct I/O to its backing file, as a disk behind a PVC would be written: a buffered loop
    device caches every page twice (ext4's, then the backing file's).
    """
    image = Path(tempfile.mkstemp(prefix="bench-ext4-", suffix=".img", dir="/var/tmp")[1])
    mount = Path(tempfile.mkdtemp(prefix="bench-ext4-"))
    try:
        subprocess.run(["truncate", "-s", f"{size_gb}G", str(image)], check=True)
        device = subprocess.run(
            ["losetup", "--direct-io=on", "--find", "--show", str(image)], check=True, capture_output=True, text=True
        ).stdout.strip()
        try:
            subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True)
            subprocess.run(["mount", device, str(mount)], check=True)
            try:
                yield mount
            finally:
                subprocess.run(["umount", str(mount)], check=False)
        finally:
            subprocess.run(["losetup", "--detach", device], check=False)
    finally:
        image.unlink(missing_ok=True)
        mount.rmdir()


@contextlib.contextmanager
def tmpfs(size_bytes: int) -> Iterator[Path]:
    """A fresh tmpfs of at most `size_bytes`, mounted for the duration; unmounting it frees all it holds at once, with
    no file-by-file removal; needs root."""
    mount = Path(tempfile.mkdtemp(prefix="bench-tmpfs-"))
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=False)
    finally:
        mount.rmdir()


def memory_available() -> int:
    """Bytes of memory the kernel says can be had without swapping (MemAvailable)."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path` (tmpfs, ext2/ext3 for ext4, ...), as `stat -f` names it."""
    return subprocess.run(
        ["stat", "-f", "-c", "%T", str(path)], check=True, capture_output=True, text=True
    ).stdout.strip()
