"""Running as the owner of the mounted workspace: the images start as root only to drop to the right user.

The Kubeflow SDK's container backend bind-mounts a folder it created with `os.makedirs` (mode 0755, owned by whoever
runs the SDK); a fixed non-root UID cannot write there, and the original images, which run as root, leave files the
trainer's user cannot clean up. So, in the images (where INITIALIZERS_ADOPT_WORKSPACE_OWNER=1), a program started as
root picks its user from the workspace before it opens any file or connection:

- the folder belongs to someone other than root: become that user and group (a workstation's SDK user);
- it belongs to root but group 0 or everyone may write: become the image's 10001:0 (an emptyDir, a prepared folder);
- it belongs to root and only root may write: stay root (rootless podman, where root is the invoking user).

Started as another user (Kubernetes `runAsUser`, `docker run --user`, OpenShift), nothing changes. The switch keeps the
supplementary groups the pod gave the process (`fsGroup`, `supplementalGroups`, podman's `--group-add`), but not root's
group 0: Secret volumes readable through them stay readable. Credential files are read again (a web identity token at
every refresh), so if one a variable names would be unreadable as the new user, the program stays root and says why.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

ENABLE = "INITIALIZERS_ADOPT_WORKSPACE_OWNER"
IMAGE_USER = (10001, 0)
#: Variables naming files the programs (or botocore, huggingface_hub) read, possibly long after the start.
CREDENTIAL_FILE_VARIABLES = (
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_CA_BUNDLE",
    "HF_TOKEN_PATH",
    "SSL_CERT_FILE",
)


def adopt(output_path: str, log: Any) -> str | None:
    """Switch to the user chosen from OUTPUT_PATH's nearest existing folder, and log it. Returns, when a switch was
    wanted but would lock a credential file away, why the program stays root."""
    if os.environ.get(ENABLE) != "1" or os.geteuid() != 0:
        return None
    folder = Path(output_path).absolute()
    while not folder.exists() and folder != folder.parent:  # its nearest existing folder
        folder = folder.parent
    info = folder.stat()
    if info.st_uid != 0:
        uid, gid = info.st_uid, info.st_gid
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (info.st_gid == 0 or info.st_mode & stat.S_IWOTH):
        uid, gid = IMAGE_USER
    else:
        return None
    groups = sorted({g for g in os.getgroups() if g not in (0, gid)})  # supplementary
    for variable in CREDENTIAL_FILE_VARIABLES:
        path = os.environ.get(variable)
        if path and os.path.isfile(path) and not _readable_by(path, uid, gid, groups):
            return (
                f"{variable} ({path}) would be unreadable as uid {uid} gid {gid} groups {groups}: "
                "staying root; make it readable by the pod's fsGroup to run unprivileged"
            )
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)  # last: after it, nothing above is permitted any more
    log.info("running as the workspace's user", uid=uid, gid=gid, groups=groups)
    return None


def _readable_by(path: str, uid: int, gid: int, groups: list[int]) -> bool:
    """By the permission bits, as the kernel would decide for that user (ACLs aside)."""
    info = os.stat(path)
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IRUSR)
    if info.st_gid == gid or info.st_gid in groups:
        return bool(info.st_mode & stat.S_IRGRP)
    return bool(info.st_mode & stat.S_IROTH)
