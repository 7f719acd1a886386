"""AWS Signature Version 4 for bodiless S3 GETs (objects and listings), header-signed; pure functions, no I/O. The S3
source signs its own: botocore spends milliseconds of CPU per request, a small object's whole budget, and a noticeable
part of a large object's run importing and building a client; credentials not given as keys come from boto3's chain.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: Headers AWS SDKs send but never sign (botocore's list): proxies and servers may rewrite them, and a server that
#: re-signs the request as an SDK would (moto does) refuses a signature that covers them.
UNSIGNED_HEADERS = frozenset({"user-agent", "expect", "transfer-encoding", "x-amzn-trace-id"})


@dataclass(frozen=True)
class SigningCredentials:
    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:  # never show the secret, even in a debugger or a traceback
        return f"SigningCredentials(access_key={self.access_key!r}, secret_key='***')"


def canonical_query(params: Mapping[str, str]) -> str:
    """The query string as SigV4 signs it (sorted, every reserved character encoded); send it exactly so."""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items()))


class GetSigner:
    """Signs GET requests for one region; caches the day's signing key per secret."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._cached: tuple[str, str, bytes] | None = None  # (secret, date, key)
        self._stamp: tuple[int, str] = (-1, "")  # (a second since the epoch, its x-amz-date): one strftime a second

    def headers(
        self,
        credentials: SigningCredentials,
        host: str,
        path: str,
        extra: Mapping[str, str],
        now: datetime,
        query: str = "",
    ) -> dict[str, str]:
        """All headers for `GET path?query` on `host`: `extra` (range, if-match ...) plus the signature. `path` is
        percent-encoded exactly as sent (S3 does not normalise it), `query` a `canonical_query`, sent as it is."""
        amz_date = self._amz_date(now)
        date = amz_date[:8]
        headers = {"host": host, "x-amz-content-sha256": UNSIGNED_PAYLOAD, "x-amz-date": amz_date}
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        headers.update({name.lower(): value.strip() for name, value in extra.items()})
        names = sorted(name for name in headers if name not in UNSIGNED_HEADERS)
        signed = ";".join(names)
        canonical = "\n".join(
            ("GET", path, query, "".join(f"{n}:{headers[n]}\n" for n in names), signed, UNSIGNED_PAYLOAD)
        )
        scope = f"{date}/{self.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._key(credentials.secret_key, date), to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        return headers

    def _amz_date(self, now: datetime) -> str:
        """`now` as x-amz-date, formatted once a second: strftime is a third of a request's signing."""
        second = int(now.timestamp())
        stamped, amz_date = self._stamp  # one tuple, swapped whole: the transfer threads share one signer
        if second != stamped:
            amz_date = now.strftime("%Y%m%dT%H%M%SZ")
            self._stamp = (second, amz_date)
        return amz_date

    def _key(self, secret: str, date: str) -> bytes:
        """The day's signing key: HMAC-SHA256 chained from "AWS4" + the secret over the date, region, service, and
        "aws4_request"."""
        cached = self._cached
        if cached is not None and cached[0] == secret and cached[1] == date:
            return cached[2]
        key = ("AWS4" + secret).encode()
        for part in (date, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._cached = (secret, date, key)
        return key
