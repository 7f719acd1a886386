"""pyarrow's S3 failures read the cache source's way: the AWS error type it names (or a bodiless answer's HTTP status)
decides whether another attempt is worth it, and the message says what to check."""

from __future__ import annotations

import re

from initializers.common.errors import first_line
from initializers.store.retry import Retriable

#: pyarrow's S3 errors name the AWS error type: "... AWS Error ACCESS_DENIED during HeadObject operation: ...".
_AWS_ERROR_TYPE = re.compile(r"\bAWS Error (\w+) during\b")
_DENIED_TYPES = frozenset({"ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "UNRECOGNIZED_CLIENT"})


#: Types worth another attempt: a 5xx, a dropped or refused connection, S3 asking for patience.
_TRANSIENT_TYPES = frozenset(
    {"INTERNAL_FAILURE", "SERVICE_UNAVAILABLE", "NETWORK_CONNECTION", "REQUEST_TIMEOUT", "SLOW_DOWN", "THROTTLING"}
)
_THROTTLING_TYPES = frozenset({"SLOW_DOWN", "THROTTLING"})
#: An answer without a body (S3's to a HEAD) has no type to name: pyarrow says "AWS Error UNKNOWN (HTTP status 503)
#: during HeadObject operation", and the status decides, as for the S3 source (`S3's answers`).
_UNTYPED_STATUS = re.compile(r"\bAWS Error UNKNOWN \(HTTP status (\d{3})\) during\b")
_THROTTLING_STATUSES = frozenset({429, 503})


def pyarrow_transient(exc: OSError, explained: str) -> Retriable | None:
    """The cache's one retry rule, for every read of pyarrow's S3 client: Retriable (`explained`) or None."""
    error_type = _aws_error_type(exc)
    if error_type in _TRANSIENT_TYPES:
        return Retriable(explained, throttled=error_type in _THROTTLING_TYPES)
    if status := _UNTYPED_STATUS.search(first_line(exc)):
        code = int(status.group(1))
        if code >= 500 or code in _THROTTLING_STATUSES:
            return Retriable(explained, throttled=code in _THROTTLING_STATUSES)
    return None


def _aws_error_type(exc: OSError) -> str | None:
    """The AWS error type pyarrow names, never digits that a file name may hold."""
    return match.group(1) if (match := _AWS_ERROR_TYPE.search(first_line(exc))) else None


def explain_os_error(exc: OSError, endpoint: str | None) -> str:
    """pyarrow's message, with what to check."""
    text = first_line(exc)
    error_type = _aws_error_type(exc)
    if error_type in _DENIED_TYPES:
        return f"access denied: {text}; check ACCESS_KEY_ID / SECRET_ACCESS_KEY / IAM_ROLE and their s3:GetObject"
    if "NETWORK_CONNECTION" in text or "curlCode" in text or "onnect" in text:
        return f"cannot reach the storage{f' at {endpoint}' if endpoint else ''}: {text}"
    return text
