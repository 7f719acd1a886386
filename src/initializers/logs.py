"""Structured logs: JSON lines for machines, console lines for people, and no secret in either.

Redaction runs on the rendered line, last, so that no processor, exception text or library message
can carry a secret past it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any


def _structlog_without_rich() -> ModuleType:
    """structlog imports `rich` whenever it is installed (pyiceberg brings it), only for pretty tracebacks that our
    renderers never use, at a cost to every start-up. Hide it during that one import; later imports still find it.
    """
    if "rich" in sys.modules:
        import structlog
    else:
        sys.modules["rich"] = None  # type: ignore[assignment]  # makes `import rich` raise ImportError
        try:
            import structlog
        finally:
            del sys.modules["rich"]
    return structlog


structlog = _structlog_without_rich()

#: Variables whose values are secrets even when they only reach us through a library's credential chain.
SECRET_ENV_VARS = ("SECRET_ACCESS_KEY", "ACCESS_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
REDACTED = "***"


class Redactor:
    """Replaces every known secret value in a rendered log line."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so that a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def __call__(self, _logger: Any, _method: str, line: str) -> str:
        for secret in self.secrets:
            line = line.replace(secret, REDACTED)
        return line


class _ForwardToStructlog(logging.Handler):
    """Library warnings (boto3, urllib3, huggingface_hub) go through the same renderer and redaction."""

    def emit(self, record: logging.LogRecord) -> None:
        structlog.get_logger(record.name).log(record.levelno, record.getMessage())


_redactor = Redactor(())


def redact(text: str) -> str:
    """`text` with every secret the logs hide hidden, for what leaves the process by another way than a log."""
    return _redactor(None, "", text)


def configure(log_format: str | None, log_level: str | None, secrets: Iterable[str]) -> None:
    global _redactor
    _redactor = Redactor([*secrets, *(os.environ.get(name, "") for name in SECRET_ENV_VARS)])
    level = getattr(logging, (log_level or "info").upper())
    fmt = log_format or ("console" if sys.stdout.isatty() else "json")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(
            colors=sys.stdout.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if fmt == "json" else structlog.dev.set_exc_info,
            renderer,
            _redactor,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    root.handlers[:] = [_ForwardToStructlog()]
    root.setLevel(max(level, logging.WARNING))


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
