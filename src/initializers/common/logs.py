"""Structured logs: JSON lines for machines, console lines for people, and no secret in either.

Redaction runs last before rendering, on every value of the entry (exception text and library messages included),
never on field names or our own event names: a filter on `event == "failed"` keeps matching whatever the secret is.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any
from urllib.parse import quote, quote_plus

from initializers.common import terminal, uri_credentials


def _structlog_without_rich() -> ModuleType:
    """structlog imports `rich` whenever it is installed (pyiceberg brings it), only for pretty tracebacks that our
    renderers never use, at a cost to every start-up. Hide it during that one import; later imports still find it."""
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


#: The shortest run of a secret's text that is hidden on its own: a server echoing part of a token, a message cut
#: short. Shorter secrets are hidden only whole; shorter runs would hide ordinary words.
PARTIAL_ECHO = 8


def _looks_random(run: str) -> bool:
    """Whether a run of a secret mixes two or more of lower case, upper case and digits, as random tokens and keys do: a
    word or number (`initializers` in a test's secret) is no secret alone; hiding it would hide that word everywhere."""
    return sum((any(c.islower() for c in run), any(c.isupper() for c in run), any(c.isdigit() for c in run))) >= 2


#: How deep escapes nest: a token JSON-escaped in a server's error body, inside a JSON log line, is two deep.
_ESCAPE_DEPTH = 2


def _escapes(text: str) -> set[str]:
    """The ways `text` can be written inside other text: as is, repr- and JSON-escaped, URL-encoded."""
    return {
        text,
        repr(text)[1:-1],
        repr(text.encode("utf-8", "backslashreplace"))[2:-1],
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        quote(text, safe=""),
        quote(text),
        quote_plus(text, safe=""),
    }


def secret_forms(secret: str) -> set[str]:
    """Every form of `secret` a line may carry: raw and each escape of it, up to `_ESCAPE_DEPTH` deep."""
    forms = {secret}
    for _ in range(_ESCAPE_DEPTH):
        forms = {escaped for form in forms for escaped in _escapes(form)}
    return forms


class Redactor:
    """Hides every known secret in a rendered log line, in any form it may take there (`secret_forms`), and every
    run of `PARTIAL_ECHO` characters or more of one of those forms that looks random (`_looks_random`)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = tuple(secrets)
        forms = {form for secret in self.secrets if secret for form in secret_forms(secret)}
        # Longest first, so that a form containing another is replaced whole. A form shorter than PARTIAL_ECHO is
        # hidden only where it stands alone, never inside a longer word: SECRET_ACCESS_KEY=a must not turn the
        # event "failed" into "f***iled", nor "test" the path "latest-tests".
        longest_first = sorted(forms, key=len, reverse=True)
        self._whole = [form for form in longest_first if len(form) >= PARTIAL_ECHO]
        short = [re.escape(form) for form in longest_first if len(form) < PARTIAL_ECHO]
        self._short = re.compile(rf"(?<![0-9A-Za-z])(?:{'|'.join(short)})(?![0-9A-Za-z])") if short else None
        runs = {form[i : i + PARTIAL_ECHO] for form in forms for i in range(len(form) - PARTIAL_ECHO + 1)}
        self._pieces = {run for run in runs if _looks_random(run)}

    def __call__(self, _logger: Any, _method: str, line: str) -> str:
        for form in self._whole:
            line = line.replace(form, REDACTED)
        if self._short is not None:
            line = self._short.sub(REDACTED, line)
        return self._hide_pieces(line) if self._pieces else line

    def _hide_pieces(self, line: str) -> str:
        """`line` with each stretch covered by pieces (runs of PARTIAL_ECHO characters of a secret) hidden."""
        hidden: list[str] = []
        covered_to = kept_from = 0
        for start in range(len(line) - PARTIAL_ECHO + 1):
            if line[start : start + PARTIAL_ECHO] in self._pieces:
                if start > covered_to or not hidden:
                    hidden += [line[kept_from:start], REDACTED]
                covered_to = kept_from = start + PARTIAL_ECHO
        return "".join(hidden) + line[kept_from:] if hidden else line


#: The field naming the library whose message an entry's event is (`_ForwardToStructlog`): such an event is text
#: from elsewhere, redacted as any value; our own event names are constants and never are.
LIBRARY = "library"


class _ForwardToStructlog(logging.Handler):
    """Library warnings (boto3, urllib3, huggingface_hub) go through the same renderer and redaction."""

    def emit(self, record: logging.LogRecord) -> None:
        structlog.get_logger(record.name).log(record.levelno, record.getMessage(), **{LIBRARY: record.name})


class _Stderr:
    """Stderr, looked up at every write: while the live view shows, what a terminal gets is printed above its block
    through the stream it puts in place (structlog's logger would keep the original)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


_redactor = Redactor(())


def redact(text: str) -> str:
    """`text` with every secret the logs hide hidden, for what leaves the process by another way than a log."""
    return _redactor(None, "", text)


def hide(secret: str) -> None:
    """Hide `secret` too, from now on: the one way a credential is registered the moment it is read or minted (a
    setting's, a URI's signature, a token a library mints, a token huggingface_hub saved)."""
    global _redactor
    if secret and secret not in _redactor.secrets:
        _redactor = Redactor([*_redactor.secrets, secret])


def _redacted_value(value: Any) -> Any:
    """`value` with the secrets known by now hidden: text, the items of lists and dicts (not their keys), and any
    other object by its text when that holds a secret."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redacted_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _redacted_value(item) for key, item in value.items()}
    text = str(value)
    hidden = redact(text)
    return value if hidden == text else hidden


def _redacted(_logger: Any, _method: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The last step before rendering: every value redacted, field names and our own event names left as they are."""
    return {
        key: value if key == "event" and LIBRARY not in entry else _redacted_value(value)
        for key, value in entry.items()
    }


def configure(log_format: str | None, log_level: str | None, secrets: Iterable[str]) -> None:
    """Logs on stderr, as rclone, s5cmd and `hf` write theirs, leaving stdout to data (a dry run's plan): `2>file`
    keeps them apart, and a container's log, which holds both streams, holds them as before. JSON lines, or for
    reading when `log_format` says so or (unset) when stderr is a terminal."""
    global _redactor
    from_env = [os.environ.get(name, "") for name in SECRET_ENV_VARS]
    # Stripped too: a library reading the variable may drop the newline a Secret made from a file leaves at its end.
    # The credentials in any URL the environment holds too (a proxy's password, an endpoint's): libraries read some.
    _redactor = Redactor(
        [
            *secrets,
            *from_env,
            *(value.strip() for value in from_env),
            *uri_credentials.environment_credentials(os.environ),
        ]
    )
    level = getattr(logging, (log_level or "info").upper())
    out = _Stderr()
    fmt = log_format or ("console" if out.isatty() else "json")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=terminal.colours(out))
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,  # a traceback as text, redacted as the other values
            _redacted,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(out),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    root.handlers[:] = [_ForwardToStructlog()]
    root.setLevel(max(level, logging.WARNING))


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
