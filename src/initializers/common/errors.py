"""How a run can fail or be stopped, each with its documented exit code."""

import errno


class InitializerError(Exception):
    """A failure the user can act on; its message is the last log line."""

    exit_code = 1


class ConfigError(InitializerError, ValueError):
    """Bad configuration: a missing or invalid variable, an unsupported scheme. Exit code 2. Also a ValueError, as the
    Kubeflow SDK raises for invalid initializer configurations (`kubeflow.sdk`)."""

    exit_code = 2


class FetchError(InitializerError):
    """The fetch failed: not found, denied, network, disk, nothing to download. Exit code 1."""


class Stopped(BaseException):
    """The run was stopped before it completed (a signal or the deadline). Exit code 1. A BaseException, as
    KeyboardInterrupt is: a library's `except Exception` around the code it interrupts must not swallow it."""

    exit_code = 1


def changed_during_download(what: str, evidence: str) -> str:
    """The one wording for a source file that changed while it was fetched; `evidence` says how that showed."""
    return f"{what} changed during the download ({evidence}); run again to fetch the new version"


def disk_error(exc: OSError, path: str | None = None) -> FetchError:
    """A local disk failure, named as such: not the source's fault, never worth a retry."""
    where = f"writing {path!r} under OUTPUT_PATH" if path else "writing under OUTPUT_PATH"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FetchError(f"{where} failed: {exc.strerror}; free space there or choose a larger volume")
    return FetchError(f"{where} failed: {exc.strerror or exc}")


def first_line(exc: BaseException) -> str:
    """A library's exception as messages quote it: its first line, else its type's name."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
