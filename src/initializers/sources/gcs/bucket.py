"""Requests to one Cloud Storage bucket over its JSON API (listing pages, an object's metadata, ranged reads pinned to
its generation) and what its answers mean. Reads ask for the stored bytes (`Accept-Encoding: gzip`): an object stored
gzip-encoded is otherwise decompressed on the way, and neither its size nor its checksums would match what arrives.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from initializers.common.errors import FetchError, changed_during_download
from initializers.common.remote_file import RemoteFile
from initializers.sources.gcs.access import GcsAccess
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, ObjectRead, ObjectReads
from initializers.store import answers

#: Where both the JSON API's and our downloads' TLS take their CA certificates from: Python's default context.
GCS_TRUST = "SSL_CERT_FILE (or SSL_CERT_DIR)"
_MAX_LISTING_PAGE = 16 << 20  # a page of 1000 objects' metadata is well under a megabyte
#: The fields of an object a run reads, and of a listing page: a page is a fraction of its size without the rest.
_OBJECT_FIELDS = "name,size,generation,md5Hash,crc32c"
_PAGE_FIELDS = f"items({_OBJECT_FIELDS}),nextPageToken"


class GcsBucket:
    """Requests to one bucket, authorized as `access` says, retried and paced under the one policy."""

    def __init__(self, bucket: str, access: GcsAccess, timeout: float) -> None:
        self.bucket = bucket
        parts = urlsplit(access.endpoint)
        self._scheme, self._netloc = parts.scheme, parts.netloc
        self._authorization = access.authorization
        self._http = HttpGetter(ssl.create_default_context, timeout, GCS_TRUST)
        self._objects = f"/storage/v1/b/{quote(bucket, safe='')}/o"
        self.objects = ObjectReads(self._http, self)

    @property
    def server(self) -> str:
        return f"{self._scheme}://{self._netloc}"

    def uri_of(self, name: str) -> str:
        """An object's URI, as messages name it."""
        return f"gs://{self.bucket}/{name}"

    def listing_page(self, prefix: str, token: str | None) -> dict[str, Any]:
        """One page of the objects whose names start with `prefix` (`token`: where the last page ended)."""
        query = {
            "prefix": prefix,
            "maxResults": "1000",
            "fields": _PAGE_FIELDS,
            **({"pageToken": token} if token else {}),
        }
        where = self.uri_of(prefix)
        return self._http.retrying("list", where, lambda: self._json(f"{self._objects}?{urlencode(query)}", where))

    def metadata(self, name: str) -> dict[str, Any] | None:
        """One object's listing fields; None when there is no such object."""
        where = self.uri_of(name)
        target = f"{self._objects}/{quote(name, safe='')}?{urlencode({'fields': _OBJECT_FIELDS})}"
        return self._http.retrying("open", where, lambda: self._json(target, where, missing_ok=True))

    def read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """The read of `file`'s bytes [offset, offset + length), pinned to its listed generation."""
        return ObjectRead(file.locator, file.version, offset, length, file.size, self.uri_of(file.locator), "download")

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """A GET of `answer`'s stored bytes (`Accept-Encoding: gzip`) of the object's generation."""
        query = urlencode({"alt": "media", "generation": read.version})
        headers = {**self._headers(), "accept-encoding": "gzip"}
        if answer.ranged:
            headers["range"] = f"bytes={answer.start}-{answer.end}"
        return Request(self._scheme, self._netloc, f"{self._objects}/{quote(read.name, safe='')}?{query}", headers)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> None:
        """A failure raised as what it means, another generation refused."""
        if response.status not in (200, 206):
            raise self._failure(response, read.where, read.version)
        served = response.header("x-goog-generation")
        if served and served != read.version:
            raise FetchError(changed_during_download(read.where, f"generation {read.version} became {served}"))

    def _headers(self) -> dict[str, str]:
        return {"host": self._netloc, "user-agent": USER_AGENT, **self._authorization()}

    def _json(self, target: str, where: str, missing_ok: bool = False) -> Any:
        response = self._http.send(Request(self._scheme, self._netloc, target, self._headers()))
        if missing_ok and response.status == 404:
            response.read_all()
            return None
        if response.status != 200:
            raise self._failure(response, where)
        body = response.read_all(_MAX_LISTING_PAGE)
        try:
            return answers.parsed(body, "the answer")
        except answers.Malformed:
            raise FetchError(f"{where}: {self.server} answered with something other than JSON") from None

    def _failure(self, response: Response, where: str, generation: str | None = None) -> Exception:
        """Cloud Storage's error answer as the exception that says what to do."""
        body = response.read_all().decode(errors="replace")
        reason, message = _error_fields(body)
        status = response.status
        if status in RETRIABLE_STATUS or status >= 500:
            return retriable(status, reason or response.reason, response.header("retry-after"))
        if status == 404 and generation is not None:
            return FetchError(changed_during_download(where, f"generation {generation} is gone: {status}"))
        if status == 404:
            return FetchError(f"the bucket of {where} does not exist ({status} {message or response.reason})")
        if status == 401:
            return FetchError(
                f"Cloud Storage refused the credentials for {where} ({status} {reason or response.reason}): check "
                "GOOGLE_APPLICATION_CREDENTIALS or the pod's Workload Identity"
            )
        if status == 403:
            return FetchError(
                f"Cloud Storage denied reading {where} ({status} {reason or response.reason}): the identity needs "
                "storage.objects.list and storage.objects.get on the bucket (roles/storage.objectViewer)"
            )
        return FetchError(f"Cloud Storage answered {status} {message or response.reason} for {where}")


def _error_fields(body: str) -> tuple[str, str]:
    """The reason and message of a JSON API error (`{"error": {"errors": [{"reason"}], "message"}}`); the body's
    first line when it is not one (the emulator's downloads answer in plain text)."""
    try:
        error = answers.parsed(body, "the error")["error"]  # Malformed is a ValueError
        reasons = [item.get("reason", "") for item in error.get("errors", []) if isinstance(item, dict)]
        return (reasons[0] if reasons else ""), str(error.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", body.strip().splitlines()[0][:200] if body.strip() else ""
