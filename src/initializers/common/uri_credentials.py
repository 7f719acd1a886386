"""The credentials a URI may carry, and the URI as it may be shown: the one rule for any URI a message, a log line or
the manifest prints. A signed URL's signature (Azure's SAS `sig`, Google's `X-Goog-Signature` and
`X-Goog-Credential`, S3's `X-Amz-Signature`, `X-Amz-Credential` and `X-Amz-Security-Token`, and other `token`,
`key` or `secret` parameters) and a password in the user information are credentials; the rest of a URI is not.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

#: Query parameters whose values are credentials, by how their names end (any case): `sig`, `X-Goog-Signature`,
#: `X-Amz-Credential`, `X-Amz-Security-Token`, `AWSAccessKeyId`, `GoogleAccessId`, `access_token`, `api_key`...
_CREDENTIAL = re.compile(r"(sig|signature|credentials?|token|secret|password|passwd|key|keyid|accessid|code)$", re.I)
#: `scheme://user:password@`: the password.
_USERINFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)(?P<password>[^/?#@]*)(?=@)")
MASK = "***"


def _query_pairs(uri: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each credential parameter's value in `uri`'s query, as written."""
    question = uri.find("?")
    if question < 0:
        return []
    found = []
    end = uri.find("#", question)
    query_end = len(uri) if end < 0 else end
    position = question + 1
    for pair in uri[question + 1 : query_end].split("&"):
        name, equals, value = pair.partition("=")
        if equals and value and _CREDENTIAL.search(unquote_plus(name)):
            start = position + len(name) + 1
            found.append((start, start + len(value), name))
        position += len(pair) + 1
    return found


def credentials_in(uri: str) -> list[str]:
    """Every credential `uri` carries, as written in it and decoded: for the logs to hide."""
    written = [uri[start:end] for start, end, _ in _query_pairs(uri)]
    if match := _USERINFO.match(uri):
        written.append(match["password"])
    return [form for value in written if value for form in dict.fromkeys((value, unquote_plus(value)))]


def credential_names(uri: str) -> list[str]:
    """The names of the query parameters of `uri` that carry credentials (`sig`, `X-Goog-Signature`...)."""
    return [name for _, _, name in _query_pairs(uri)]


def masked(uri: str) -> str:
    """`uri` as it may be shown: each credential in its query, and a password in it, replaced by `MASK`."""
    for start, end, _ in reversed(_query_pairs(uri)):
        uri = uri[:start] + MASK + uri[end:]
    return _USERINFO.sub(lambda match: match["head"] + MASK, uri, count=1)
