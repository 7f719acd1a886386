"""Azure Storage's SharedKey authorization for bodiless GETs: HMAC-SHA256 with the account's key over Azure's canonical
string (versions 2009-09-19 and later). Written here, as `sources/aws/sigv4.py` is for S3, not through
azure-storage-blob: its pipeline costs far more CPU per request than the signing, and small blobs are all requests.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from email.utils import formatdate

from initializers.common.errors import ConfigError

#: The standard headers signed, in this order, before the x-ms-* ones (an absent one as an empty line).
STANDARD_HEADERS = ("content-encoding", "content-language", "content-length", "content-md5", "content-type", "date",
                    "if-modified-since", "if-match", "if-none-match", "if-unmodified-since", "range")  # fmt: skip


def string_to_sign(method: str, account: str, path: str, params: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """Azure's canonical string of a request: the verb, the standard headers in order (a zero Content-Length empty),
    the x-ms-* headers sorted (lower-case names, stripped values), then `/ACCOUNT`, the path as sent (percent-encoded;
    path-style, it names the account again) and each query parameter, decoded, on its own line in name order."""
    lower = {name.lower(): value for name, value in headers.items()}
    standard = [
        "" if name == "content-length" and lower.get(name) == "0" else lower.get(name, "") for name in STANDARD_HEADERS
    ]
    ms = [f"{name}:{value.strip()}" for name, value in sorted(lower.items()) if name.startswith("x-ms-")]
    resource = f"/{account}{path}" + "".join(f"\n{name.lower()}:{value}" for name, value in sorted(params.items()))
    return "\n".join([method, *standard, *ms, resource])


class SharedKey:
    """Requests signed with the account's key, named by `variable` where Azure refuses it."""

    def __init__(self, account: str, key: str, variable: str) -> None:
        try:
            self._key = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{variable}: not a storage account key, which is base64 (value not shown)") from None
        self._account = account
        self.check = variable

    def __repr__(self) -> str:  # never show the key, even in a traceback
        return f"SharedKey(account={self._account!r}, key='***')"

    def authorize(self, path: str, params: Mapping[str, str], headers: dict[str, str]) -> str:
        """Date and sign the request: its `Authorization` header; nothing for its query."""
        headers["x-ms-date"] = formatdate(usegmt=True)
        text = string_to_sign("GET", self._account, path, params, headers)
        signature = base64.b64encode(hmac.new(self._key, text.encode(), hashlib.sha256).digest()).decode()
        headers["authorization"] = f"SharedKey {self._account}:{signature}"
        return ""
