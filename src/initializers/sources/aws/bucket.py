"""S3 requests to one bucket, for the S3 and cache sources: where it is served, SigV4-signed GETs of listing pages and,
through `ObjectReads`, of object ranges pinned to the listed ETag; what S3's answers mean (why not botocore: `sigv4`).
"""

from __future__ import annotations

import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from initializers.common import logs
from initializers.common.errors import ConfigError, FetchError, changed_during_download
from initializers.common.remote_file import Checksum, RemoteFile, base64_digest
from initializers.sources.aws.access import AwsAccess
from initializers.sources.aws.crc32 import CRC32, CRC32_KIND
from initializers.sources.aws.sigv4 import GetSigner, SigningCredentials, canonical_query
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, Discard, ObjectRead, ObjectReads, xml_field
from initializers.store.hashers import MD5, SHA1, SHA256, kinds
from initializers.store.retry import Retriable

if TYPE_CHECKING:
    import botocore.session

_MAX_LISTING_PAGE = 16 << 20  # a page of 1000 keys of 1 KiB each is about 1.3 MB
#: A key whose botocore-built URL reveals the bucket's addressing (see ObjectEndpoint.from_object_url).
PROBE_KEY = "initializers-probe"
_log = logs.get_logger("initializers.s3")
#: Where the S3 source takes its CA certificates from (`AwsAccess.ca_bundle`), as a certificate failure names it.
S3_TRUST = "AWS_CA_BUNDLE (or a profile's ca_bundle)"
#: Response headers that mean the ETag is not the MD5 of the content (SSE-C; SSE-KMS, unless they say AES256).
_ENCRYPTION_HEADERS = ("x-amz-server-side-encryption-customer-algorithm", "x-amz-server-side-encryption")


@dataclass(frozen=True)
class ObjectEndpoint:
    """Where a bucket's objects live: scheme, host and the path before the key (`/bucket/` or `/`)."""

    scheme: str
    netloc: str
    path_prefix: str

    @classmethod
    def path_style(cls, endpoint_url: str, bucket: str) -> ObjectEndpoint:
        """`ENDPOINT/bucket/key`, as botocore addresses a bucket on an S3-compatible endpoint."""
        parts = urlsplit(endpoint_url)
        return cls(parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/{quote(bucket, safe='')}/")

    @classmethod
    def from_object_url(cls, url: str) -> ObjectEndpoint:
        """Derive it from the URL botocore builds for the probe key, so addressing matches boto3 exactly."""
        parts = urlsplit(url)
        if not parts.path.endswith("/" + PROBE_KEY):
            raise ValueError(f"unexpected object URL shape: {parts.scheme}://{parts.netloc}{parts.path}")
        return cls(parts.scheme, parts.netloc, parts.path[: -len(PROBE_KEY)])

    def path(self, key: str) -> str:
        return self.path_prefix + quote(key, safe="/~")


@dataclass(frozen=True)
class Operation:
    """What a request does, for its error messages: the verb, and the permission a denial is about."""

    verb: str
    permission: str


READ = Operation("read", "s3:GetObject")
OPEN = Operation("open", "s3:GetObject")  # an object named in the configuration, not found by a listing
LIST = Operation("list", "s3:ListBucket")


class S3Getter:
    """Signed GETs of one bucket, on ENDPOINT (path-style), else where botocore's rules serve it in a region; when it
    lives in another region than configured, S3 redirects the first request, and every later one goes there."""

    def __init__(self, bucket: str, access: AwsAccess, timeout: float) -> None:
        self.bucket = bucket
        self._access = access
        #: What each request is signed with, as of now (see `AwsAccess.credentials`).
        self.credentials: Callable[[], SigningCredentials | None] = access.credentials()
        self._endpoint = self._endpoint_in(access.region)
        self._signer = GetSigner(access.region)
        self._relocation_lock = threading.Lock()
        self._http = HttpGetter(partial(ssl.create_default_context, cafile=access.ca_bundle), timeout, S3_TRUST)
        self._common = {"user-agent": USER_AGENT}
        if access.requester_pays:
            self._common["x-amz-request-payer"] = "requester"
        #: Its objects' reads (`ObjectReads`), asked and judged as S3 asks and answers (`request`, `judge`).
        self.objects = ObjectReads(self._http, self)

    @property
    def region(self) -> str:
        return self._signer.region

    @property
    def server(self) -> str:
        """Where the bucket is served, as messages name the server: `scheme://host[:port]`."""
        return f"{self._endpoint.scheme}://{self._endpoint.netloc}"

    def uri_of(self, key: str) -> str:
        """The URI of a key, as messages name it."""
        return f"s3://{self.bucket}/{key}"

    def locate(self, key: str) -> None:
        """Read the first byte of `key` and drop it: S3 redirects a request for a bucket in another region, and
        everything after goes there (`region`); a key that cannot be read fails here, in S3's words."""
        self.objects.get(ObjectRead(key, None, 0, 1, None, self.uri_of(key), OPEN.verb), Discard())

    def read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """The read of `file`'s bytes [offset, offset + length), pinned to its listed ETag."""
        return ObjectRead(file.locator, file.version, offset, length, file.size, self.uri_of(file.locator))

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """A signed GET of `answer`'s bytes of the object, with If-Match on its ETag and S3's own checksum asked for."""
        extra = {"if-match": f'"{read.version}"'} if read.version else {}
        if answer.ranged:
            extra["range"] = f"bytes={answer.start}-{answer.end}"
        extra["x-amz-checksum-mode"] = "ENABLED"
        return self._signed(self._endpoint.path(read.name), "", extra)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> None:
        """S3's failure raised as what it means, a changed object refused; the checksum it vouches for passed on."""
        if response.status not in (200, 206):
            raise self._s3_failure(OPEN if read.verb == OPEN.verb else READ, read.where, response)
        etag = (response.header("etag") or "").strip('"')
        if etag and read.version and etag != read.version:
            raise FetchError(changed_during_download(read.where, f"ETag {read.version} became {etag}"))
        if not answer.ranged and response.length is None:
            raise FetchError(
                f"{read.where}: the listing said {read.size} bytes, the server sends a body with no Content-Length, "
                "as S3 never does"
            )
        checksum = _vouched(response, read.version or "", answer.ranged)
        if checksum is not None:
            answer.sink.expect(checksum)

    def get_listing_page(self, query: dict[str, str], where: str) -> bytes:
        """The body of one ListObjectsV2 page of the bucket; `where` names what is listed, for messages."""
        return self._http.retrying(LIST.verb, where, lambda: self._get_listing_page_once(canonical_query(query), where))

    def _endpoint_in(self, region: str) -> ObjectEndpoint:
        """Where the bucket is served in `region`: on ENDPOINT, or where AWS serves it there."""
        access = self._access
        if access.endpoint:
            return ObjectEndpoint.path_style(access.endpoint, self.bucket)
        return _aws_endpoint(access.session, region, self.bucket, access.anonymous)

    def _get_listing_page_once(self, query: str, where: str) -> bytes:
        response = self._http.send(self._signed(self._endpoint.path_prefix, query, {}))
        if response.status != 200:
            raise self._s3_failure(LIST, where, response)
        return response.read_all(_MAX_LISTING_PAGE)

    def _signed(self, path: str, query: str, extra: dict[str, str]) -> Request:
        """`GET path?query` to the bucket, signed unless anonymous."""
        credentials = self.credentials()
        endpoint, signer, extra = self._endpoint, self._signer, {**self._common, **extra}
        headers = (
            signer.headers(credentials, endpoint.netloc, path, extra, datetime.now(UTC), query)
            if credentials
            else {"host": endpoint.netloc, **extra}
        )
        return Request(endpoint.scheme, endpoint.netloc, f"{path}?{query}" if query else path, headers)

    def _s3_failure(self, operation: Operation, where: str, response: Response) -> Exception:
        """S3's error answer as the exception that says what to do; a wrong region is corrected here, and retried."""
        body = response.read_all().decode(errors="replace")
        code = xml_field(body, "Code") or response.reason
        message = xml_field(body, "Message") or ""
        region = response.header("x-amz-bucket-region") or xml_field(body, "Region")
        if region and region != self.region and (response.status == 301 or code in _WRONG_REGION):
            self._relocate(region)
            return Retriable(f"{response.status} {code}: the bucket is in {region}")
        transient = s3_transient(response.status, code, response.header("retry-after"))
        return transient or FetchError(s3_error(operation, where, response.status, code, message))

    def _relocate(self, region: str) -> None:
        """Send everything from now on to the bucket's own region (once: threads redirected together agree)."""
        with self._relocation_lock:
            if self._signer.region != region:
                _log.info("bucket in another region", bucket_region=region, configured_region=self.region)
                self._endpoint = self._endpoint_in(region)
                self._signer = GetSigner(region)


def s3_transient(status: int, code: str, retry_after_header: str | None) -> Retriable | None:
    """S3's one rule for what is worth another attempt: a 5xx, a timeout, throttling (SlowDown, waited out as asked)."""
    if status in RETRIABLE_STATUS or code in ("SlowDown", "RequestTimeout", "InternalError"):
        return retriable(status, code, retry_after_header, throttled=code == "SlowDown")
    return None


#: Error codes with which S3 says the credentials themselves are refused, not what they may do.
_REJECTED_CREDENTIALS = frozenset({"SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken", "ExpiredToken"})
#: Error codes with which S3 says a request went to the wrong region (it names the right one).
_WRONG_REGION = frozenset({"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"})


def s3_error(operation: Operation, where: str, status: int, code: str, message: str) -> str:
    """The message for a failed S3 request: the table of S3's answers in docs/behaviour.md, in code."""
    if code == "NoSuchBucket":
        return f"the bucket of {where} does not exist ({code})"
    if status == 412:
        return changed_during_download(where, f"its ETag no longer matches: {status} {code}")
    if code == "InvalidObjectState":
        return (
            f"{where} is archived (Glacier or Deep Archive) and has no restored copy ({code}): restore it first "
            "(S3 RestoreObject), or exclude it with IGNORE_PATTERNS"
        )
    if status == 404:
        return (
            f"{where}: no such file ({code})"
            if operation is OPEN
            else f"{where} disappeared after it was listed ({code})"
        )
    if status == 416:
        if operation is OPEN:
            return f"{where} is empty ({code})"
        return changed_during_download(where, f"it is shorter than listed: {code}")
    if status == 301 or code in _WRONG_REGION:
        return f"S3 answered {status} {code} for {where}: the bucket is in another region; set REGION to it"
    if "kms" in message.lower() or code.startswith("KMS."):
        return (
            f"S3 denied {operation.verb}ing {where}: {code}: the object is encrypted with a KMS key the credentials "
            f"may not use (kms:Decrypt): {message}"
        )
    if status in (401, 403) and code in _REJECTED_CREDENTIALS:
        return (
            f"S3 denied {operation.verb}ing {where}: {code}: the credentials were rejected; check ACCESS_KEY_ID and "
            "SECRET_ACCESS_KEY (or the role)"
        )
    if status in (401, 403):
        return (
            f"S3 denied {operation.verb}ing {where}: {code}: the credentials lack permission ({operation.permission}), "
            "or the bucket is not public (ANONYMOUS=true), or it is a Requester Pays bucket (REQUEST_PAYER=requester)"
        )
    return f"S3 answered {status} {code} for {where}" + (f": {message}" if message else "")


def _vouched(response: Response, etag: str, ranged: bool) -> Checksum | None:
    """What the whole object's bytes must hash to, by this answer: a full-object checksum S3 stores (x-amz-checksum-*,
    which boto3 has written by default since 2025; on a ranged answer only when it says FULL_OBJECT, as a range's could
    be a part's), else the MD5 a plain ETag is: CRC32 is several times cheaper than MD5, and ranges' CRCs combine."""
    stated = response.header("x-amz-checksum-type")
    full_object = (stated or ("" if ranged else "FULL_OBJECT")).upper() == "FULL_OBJECT"
    for algorithm, length in _CHECKSUMS if full_object else ():
        digest = base64_digest(response.header(f"x-amz-checksum-{algorithm}"), length)  # "...-N" (of the parts'): None
        if digest is not None:
            return Checksum(algorithm, digest.hex())
    return _etag_md5(response, etag)


def _etag_md5(response: Response, etag: str) -> Checksum | None:
    """The content's MD5, when the ETag is one: that of a single-part upload (a multipart one ends in -N) stored
    without SSE-C or SSE-KMS (whose ETags look like MD5s but are not). The one place S3's rule is kept: what a fetch
    checks here is recorded, and VERIFY re-hashes against that record only."""
    encrypted = response.header(_ENCRYPTION_HEADERS[0]) is not None or not (
        response.header(_ENCRYPTION_HEADERS[1]) or "AES256"
    ).startswith("AES256")
    return Checksum("md5", etag) if re.fullmatch(r"[0-9a-f]{32}", etag) and not encrypted else None


#: Full-object checksums S3 may hold that the standard library computes, with their lengths, cheapest first (CRC32C
#: and CRC64NVME need native code: their objects fall back to the ETag's MD5).
_CHECKSUMS = ((CRC32, 4), ("sha1", 20), ("sha256", 32))
#: What an object's bytes may be verified against: a full-object checksum S3 stores, or the MD5 a plain ETag is.
CHECKSUM_KINDS = kinds(CRC32_KIND, SHA1, SHA256, MD5)


def _aws_endpoint(
    session: botocore.session.Session | None, region: str, bucket: str, anonymous: bool
) -> ObjectEndpoint:
    """Where AWS serves the bucket (virtual-host or path style, FIPS ...), as botocore's URL for a probe key says."""
    from botocore import UNSIGNED
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import BotoCoreError

    assert session is not None, "without ENDPOINT, botocore always has a session"
    try:
        client = session.create_client(
            "s3", region_name=region, config=BotoConfig(signature_version=UNSIGNED if anonymous else None)
        )
        url = client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": PROBE_KEY})
    except (BotoCoreError, ValueError) as exc:
        raise ConfigError(f"REGION: no S3 endpoint for region {region!r}: {exc}") from None
    client.close()
    return ObjectEndpoint.from_object_url(url)
