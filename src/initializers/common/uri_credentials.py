"""The credentials a URI may carry, and the URI as it may be shown: the one rule for any URI a message, a log line or
the manifest prints. A signed URL's signature parameters (`_CREDENTIAL`: Azure's SAS `sig`, Google's `X-Goog-Signature`,
S3's `X-Amz-Signature`...) and a password in the user information are credentials; the rest is not."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from urllib.parse import unquote, unquote_plus, urlencode, urlsplit

#: Query parameters (and form or JSON fields) whose values are credentials, by how their names end (any case): `sig`,
#: `X-Goog-Signature`, `X-Amz-Security-Token`, `AWSAccessKeyId`, `access_token`, `api_key`, an OAuth `assertion`...
_CREDENTIAL = re.compile(
    r"(sig|signature|credentials?|token|secret|password|passwd|key|keyid|accessid|code|assertion)$", re.I
)
#: `scheme://user:password@`: the password.
_USERINFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)(?P<password>[^/?#@]*)(?=@)")
MASK = "***"


def is_credential_name(name: str) -> bool:
    """Whether a parameter or field named `name` carries a credential (`sig`, `access_token`, `assertion`...)."""
    return bool(_CREDENTIAL.search(name))


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
        if equals and value and is_credential_name(unquote_plus(name)):
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


def credentials_in_body(body: bytes | str | None) -> list[str]:
    """Every credential a form (`grant_type=...&assertion=...`) or a JSON object (`{"access_token": ...}`) carries in a
    field named as one (`is_credential_name`), as written and decoded: what a token endpoint is sent and answers."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body or ""
    try:
        fields = json.loads(text)
    except ValueError:
        return credentials_in(f"?{text.strip()}")
    return [value for name, value in _fields(fields) if is_credential_name(name)]


def credentials_sent(url: str, body: bytes | str | Mapping[str, str] | None, headers: Mapping[str, str]) -> list[str]:
    """Every credential a request carries: in its URL, its body (a form, given as a mapping or written; JSON) and its
    Authorization headers (the part after the scheme): what a credential library sends a token endpoint (a signed
    assertion, a client secret, a subject token), for the logs to hide before it leaves."""
    if isinstance(body, Mapping):
        body = urlencode(body)
    authorizations = [
        value.partition(" ")[2] or value
        for name, value in headers.items()
        if name.lower() in ("authorization", "proxy-authorization")
    ]
    return [*credentials_in(url), *credentials_in_body(body), *authorizations]


def _fields(value: object, name: str | None = None) -> list[tuple[str, str]]:
    """(name, text) of every text field of a JSON value, however deep (`name`: the field `value` is, if one)."""
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _fields(item, str(key))]
    if isinstance(value, list):
        return [found for item in value for found in _fields(item)]
    return [(name, value)] if name is not None and isinstance(value, str) and value else []


#: The variables naming a proxy, as urllib, requests, httpx and botocore read them (either case).
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def environment_credentials(env: Mapping[str, str]) -> list[str]:
    """The credentials in the URLs `env` holds, whoever reads them (ours, or a library's: HF_ENDPOINT, a proxy),
    and for each proxy with a password the Basic credentials (`base64(user:password)`) every client sends it in
    Proxy-Authorization, which a proxy may quote back."""
    found = [secret for value in env.values() if "://" in value for secret in credentials_in(value)]
    for name in PROXY_VARIABLES:
        url = env.get(name, "")
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if url and parts.password is not None:
            found += credentials_in(parts.geturl())
            user, password = unquote(parts.username or ""), unquote(parts.password)
            found.append(base64.b64encode(f"{user}:{password}".encode()).decode())
    return found
