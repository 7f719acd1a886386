"""One retry policy for every request to a remote service (a store's listing, reads and API): what is worth another
attempt, how long to wait, when to give up.

- Throttling (429, 503, S3's SlowDown) is the service asking for patience: every request of the source is held with
  the one throttled until a probe is answered (`throttle`), and each request's waits add up to a budget that outlasts
  the Hub's rate-limit window (5 minutes), however many attempts that takes.
- Other transient failures (resets, timeouts, 5xx) get a few attempts with exponential backoff and jitter.
- Permanent failures (a TLS certificate that does not verify) fail at once: no retry can fix them. The message names
  the variable the failing path reads its CA certificates from (`trust`), so that the hint is one that works.
A run's TIMEOUT bounds all of it: the deadline interrupts a wait like any other.
"""

from __future__ import annotations

import random
import re
import ssl
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import TypeVar

from initializers.common import logs
from initializers.common.clock import Clock, SystemClock
from initializers.common.errors import FetchError
from initializers.store.throttle import Throttle

_T = TypeVar("_T")
#: Attempts at a request that keeps failing for reasons other than throttling.
ATTEMPTS = 5
#: Seconds a request may spend waiting out throttling: a Hub rate-limit window is 5 minutes.
THROTTLE_BUDGET_SECONDS = 330.0
_MAX_BACKOFF_SECONDS = 30.0
_log = logs.get_logger("initializers.store.retry")
_SYSTEM_CLOCK = SystemClock()


class Retriable(Exception):
    """A server answer worth trying again: `throttled` if it asked us to slow down, `retry_after` the seconds named."""

    def __init__(self, reason: str, *, throttled: bool = False, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.throttled = throttled
        self.retry_after = retry_after


#: Failures of a request worth another attempt: the network's (resets, timeouts, framing) and the server's transient
#: answers. Anything else (a refused answer, a local disk's failure) is final.
TRANSIENT: tuple[type[Exception], ...] = (OSError, Retriable)


def retry_after(value: str | None) -> float | None:
    """A `Retry-After` header's delay in seconds (it may be a number or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def untrusted_certificate(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate failure behind `exc`: `exc` itself, or what a client library (httpx) wrapped in its own."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, ssl.SSLCertVerificationError):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def retrying(
    verb: str,
    where: str,
    attempt: Callable[[], _T],
    before_retry: Callable[[], None] = lambda: None,
    interrupted: Callable[[], bool] = lambda: False,
    clock: Clock = _SYSTEM_CLOCK,
    trust: str | None = None,
    transient: tuple[type[Exception], ...] = TRANSIENT,
    throttle: Throttle | None = None,
) -> _T:
    """`attempt()`, again after transient failures (`before_retry` first: e.g. drop connections in an unknown state);
    FetchError saying why once the failure is permanent or the attempts or the budget are used up. Once
    `interrupted()`, no attempt starts: a listing that pages for ever stops at its next page. `trust`: the variable
    naming this path's CA certificates, for the hint when one does not verify. `transient`: the failures worth
    another attempt, when an attempt does more than ask a server (a local disk's OSError is not one). `throttle`: the
    hold this request shares with its source's others (none: its own)."""
    throttle = throttle or Throttle(clock)
    failures = 0
    throttled_for = 0.0
    while True:
        waited = throttle.wait_turn(THROTTLE_BUDGET_SECONDS - throttled_for)
        if waited is None:  # the source's requests are held for longer than this one may still wait
            raise _beyond_budget(verb, where, throttle.asked, throttled_for, "its source's requests are held")
        throttled_for += waited
        if interrupted():
            raise FetchError(f"{where}: interrupted")
        sent_at = clock.monotonic()
        try:
            answer = attempt()
            throttle.answered(sent_at)
            return answer
        except Exception as exc:  # resets, timeouts, TLS and framing errors, 5xx, throttling are worth another try
            _refuse_untrusted(exc, f"{verb} {where}", trust)
            if not isinstance(exc, transient):
                raise
            before_retry()
            if interrupted():
                raise FetchError(f"{where}: interrupted") from None
            throttled = isinstance(exc, Retriable) and exc.throttled
            if throttled:
                wait = throttle.throttled(exc.retry_after, sent_at)
                if throttled_for + wait > THROTTLE_BUDGET_SECONDS:
                    raise _beyond_budget(verb, where, exc.retry_after, throttled_for, _reason(exc)) from None
            else:
                failures += 1
                if failures == ATTEMPTS:
                    raise FetchError(f"cannot {verb} {where} after {failures} attempts: {_reason(exc)}") from None
                wait = min(0.2 * 2**failures, _MAX_BACKOFF_SECONDS) * random.uniform(0.5, 1.5)
            _log.info("waiting to retry", request=f"{verb} {where}", reason=_reason(exc), wait_s=round(wait, 2))
            if not throttled:  # the fleet's hold is waited out at the next turn, where a probe may end it
                clock.sleep(wait)


def _beyond_budget(verb: str, where: str, asked: float | None, throttled_for: float, reason: str) -> FetchError:
    """A request giving up on a throttling that would outlast its budget."""
    said = f"asked to wait {asked:.0f} s more" if asked is not None else "throttled"
    return FetchError(
        f"cannot {verb} {where}: the server {said} after {throttled_for:.0f} s of waiting, beyond the "
        f"{THROTTLE_BUDGET_SECONDS:.0f} s a request may wait out throttling: {reason}"
    )


def _refuse_untrusted(exc: Exception, request: str, trust: str | None) -> None:
    """A certificate that does not verify is final: FetchError naming the variable of the CA certificates (`trust`)."""
    if failure := untrusted_certificate(exc):
        hint = f"; for a private CA set {trust} to its certificate file" if trust else ""
        raise FetchError(
            f"cannot {request}: the server's TLS certificate does not verify ({failure.verify_message}){hint}"
        ) from None


def _reason(exc: BaseException) -> str:
    """A failure as a message says it: its own words without the errno tag (`[Errno 111] Connection refused`), or,
    when it has none, its kind in words (`ConnectionResetError` -> `connection reset`), never a class name."""
    text = _ERRNO.sub("", str(exc)).strip()
    if text:
        return text
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type(exc).__name__).lower().split()
    return " ".join(words[:-1] if len(words) > 1 and words[-1] in ("error", "exception") else words)


#: The errno tag Python puts before an OSError's words, wherever a library left it in its message.
_ERRNO = re.compile(r"\[Errno -?\d+\]\s*")
