"""The termination message: a run's outcome where Kubernetes shows it (`kubectl describe pod`, the pod's status).

Kubernetes reports what a container left at its `terminationMessagePath` (by default /dev/termination-log) when it
exits; for a failed init container that is the first thing a user sees. Written only where that file exists, so a run
outside Kubernetes leaves nothing behind. It is one line, shown as the console logs and the live view show text
(`terminal.printable`): a control character from a source's name (ESC, BEL, a newline) is written as its escape, since
`kubectl describe` and the terminal showing it would obey it; none of our own messages spans lines.
"""

from __future__ import annotations

import os

from initializers.common.logs import redact
from initializers.common.terminal import printable

#: Where the message goes: Kubernetes' default `terminationMessagePath`; the variable lets tests point elsewhere.
PATH_VARIABLE = "INITIALIZERS_TERMINATION_LOG"
DEFAULT_PATH = "/dev/termination-log"
#: Kubernetes keeps at most 4096 bytes of it.
LIMIT_BYTES = 4096


def leave(message: str) -> None:
    """Replace the file's content with `message`, secrets hidden, control characters escaped and cut to Kubernetes'
    limit (at a whole character); never fails the run."""
    path = os.environ.get(PATH_VARIABLE, DEFAULT_PATH)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW)  # never created here
    except OSError:
        return
    with os.fdopen(fd, "wb") as handle:
        handle.write(printable(redact(message)).encode()[:LIMIT_BYTES].decode(errors="ignore").encode())
