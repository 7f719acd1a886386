"""Running as the owner of the mounted workspace: the images start as root only to drop to the right user.

The Kubeflow SDK's container backend bind-mounts a folder it created with `os.makedirs` (mode 0755, owned by
whoever runs the SDK); a fixed non-root UID cannot write there, and the original images, which run as root,
leave files the trainer's user cannot clean up. So, in the images (where INITIALIZERS_ADOPT_WORKSPACE_OWNER=1),
a program started as root picks its user from the workspace before it opens any file or connection:

- the folder belongs to someone other than root: become that user and group (a workstation's SDK user);
- it belongs to root but group 0 or everyone may write: become the image's own user, 10001:0 (an emptyDir,
  a prepared folder);
- it belongs to root and only root may write: stay root (rootless podman, where root is the invoking user).

Started as any other user (Kubernetes `runAsUser`, `docker run --user`, OpenShift) nothing changes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

ENABLE = "INITIALIZERS_ADOPT_WORKSPACE_OWNER"
IMAGE_USER = (10001, 0)


def adopt(output_path: str) -> tuple[int, int] | None:
    """Switch to the user chosen from OUTPUT_PATH's nearest existing folder; returns (uid, gid) when it switched."""
    if os.environ.get(ENABLE) != "1" or os.geteuid() != 0:
        return None
    folder = _nearest_existing(Path(output_path).absolute())
    info = folder.stat()
    if info.st_uid != 0:
        target = (info.st_uid, info.st_gid)
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (info.st_gid == 0 or info.st_mode & stat.S_IWOTH):
        target = IMAGE_USER
    else:
        return None
    uid, gid = target
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # last: after it, nothing above is permitted any more
    return target


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
