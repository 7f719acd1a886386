"""Requests to one repository of a registry over the distribution API: a manifest by tag or digest (its types listed
in `Accept`: Distribution answers an OCI manifest `MANIFEST_UNKNOWN` otherwise), and a blob's bytes in ranges. A blob
redirected to another host (object storage, as real registries answer) is followed without the registry's
authorization; a 401 is met with its challenge once (`credentials`). What the registry answers is read here.
"""

from __future__ import annotations

import ssl
from dataclasses import replace
from urllib.parse import urlsplit

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.sources.http.getter import RETRIABLE_STATUS, USER_AGENT, HttpGetter, Request, retriable
from initializers.sources.http.http1 import Response
from initializers.sources.http.objects import Answer, ObjectRead, ObjectReads, redirect_of
from initializers.sources.oci.credentials import RegistryAuth
from initializers.sources.oci.location import OciLocation
from initializers.sources.oci.manifests import ACCEPT
from initializers.store import answers

REGISTRY_TRUST = "SSL_CERT_FILE (or SSL_CERT_DIR)"
_MAX_MANIFEST = 4 << 20  # the distribution spec's advised limit
#: A 401 met with its challenge, and the request sent again: at most this many times for one request.
_CHALLENGES = 2


class OciRegistry:
    """Requests to the location's repository, authorized by `auth`, retried and paced under the one policy."""

    def __init__(self, location: OciLocation, scheme: str, http: HttpGetter, auth: RegistryAuth) -> None:
        self.location = location
        self._scheme, self._netloc = scheme, location.api_host
        self._http = http
        self._auth = auth
        self.objects = ObjectReads(http, self)

    @classmethod
    def http(cls, timeout: float) -> HttpGetter:
        return HttpGetter(ssl.create_default_context, timeout, REGISTRY_TRUST)

    @property
    def server(self) -> str:
        return f"{self._scheme}://{self._netloc}"

    def manifest(self, reference: str) -> tuple[bytes, str | None, str | None]:
        """The manifest `reference` names (a tag, a digest): its bytes, its Content-Type and Docker-Content-Digest."""
        where = f"{self.location.place}{'@' if reference.startswith('sha256:') else ':'}{reference}"
        target = f"/v2/{self.location.repository}/manifests/{reference}"
        try:
            return self._http.retrying("open", where, lambda: self._manifest_once(target, where))
        except FetchError as exc:
            if self._scheme == "https" and "WRONG_VERSION_NUMBER" in str(exc):  # TLS asked of a plain HTTP server
                raise FetchError(
                    f"{exc}: {self._netloc} does not answer over HTTPS; if it is served over plain HTTP, name it in "
                    f"OCI_PLAIN_HTTP ({self._netloc})"
                ) from None
            raise

    def _manifest_once(self, target: str, where: str) -> tuple[bytes, str | None, str | None]:
        for _ in range(_CHALLENGES + 1):
            headers = {"host": self._netloc, "user-agent": USER_AGENT, "accept": ACCEPT, **self._auth.headers()}
            response = self._http.send(Request(self._scheme, self._netloc, target, headers))
            if response.status == 401:
                body = response.read_all()  # first: the token service may be on this connection's origin
                if self._auth.answer(response.header("www-authenticate"), headers):
                    continue
                raise self._failure(response, where, "no such repository or tag", body)
            if response.status != 200:
                raise self._failure(response, where, "no such repository or tag")
            self._auth.answered(headers)
            body = response.read_all(_MAX_MANIFEST + 1)
            if len(body) > _MAX_MANIFEST:
                raise FetchError(f"{where}: {self.server} answered a manifest over {_MAX_MANIFEST} bytes")
            return body, response.header("content-type"), response.header("docker-content-digest")
        raise FetchError(f"{where}: {self.server} refused every authorization it asked for")

    def read_of(self, file: RemoteFile, offset: int, length: int) -> ObjectRead:
        """The read of `file`'s blob bytes [offset, offset + length); a blob is its digest, so never another version."""
        where = f"{self.location}: {file.path} (blob {file.locator})"
        return ObjectRead(file.locator, file.version, offset, length, file.size, where, "download")

    def request(self, read: ObjectRead, answer: Answer) -> Request:
        """A GET of `answer`'s bytes of the blob, or of where the registry redirected it (a URL: its authorization
        only on the registry's own origin)."""
        if "://" in read.name:
            parts = urlsplit(read.name)
            scheme, netloc, target = (
                parts.scheme,
                parts.netloc,
                (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            )
        else:
            scheme, netloc, target = self._scheme, self._netloc, f"/v2/{self.location.repository}/blobs/{read.name}"
        headers = {"host": netloc, "user-agent": USER_AGENT, "accept-encoding": "identity"}
        if (scheme, netloc) == (self._scheme, self._netloc):
            headers.update(self._auth.headers())
        if answer.ranged:
            headers["range"] = f"bytes={answer.start}-{answer.end}"
        return Request(scheme, netloc, target, headers)

    def judge(self, read: ObjectRead, answer: Answer, sent: Request, response: Response) -> Request | None:
        """A redirect followed (http:// and https:// only), a challenge met; a failure raised as what it means."""
        url = redirect_of(read, sent, response)
        if url is not None:
            return self.request(replace(read, name=url), answer)
        if response.status == 401 and sent.netloc == self._netloc:
            body = response.read_all()  # first: the token service may be on this connection's origin
            if self._auth.answer(response.header("www-authenticate"), sent.headers):
                return self.request(read, answer)
            raise self._failure(response, read.where, "no such blob", body)
        if response.status not in (200, 206):
            raise self._failure(response, read.where, "no such blob")
        self._auth.answered(sent.headers)
        return None

    def _failure(self, response: Response, where: str, missing: str, body: bytes | None = None) -> Exception:
        """The registry's error answer (`{"errors": [{"code", "message"}]}`, its `body` if read already) as the
        exception that says what to do; `missing`: what a 404 means."""
        status = response.status
        code, message = _error_fields(response.read_all() if body is None else body)
        if status in RETRIABLE_STATUS or status >= 500:
            return retriable(status, code or response.reason, response.header("retry-after"))
        said = f"{status} {code or response.reason}{f': {message}' if message else ''}"
        if status == 404 and code == "NAME_UNKNOWN":
            return FetchError(f"{where}: {self.server} has no repository {self.location.repository!r} ({said})")
        if status == 404:
            return FetchError(f"{where}: {self.server} has {missing} ({said})")
        if status == 401:
            return FetchError(
                f"{where}: {self.server} requires credentials it accepts ({said}): set OCI_USERNAME and OCI_PASSWORD, "
                "or a Docker config file (REGISTRY_AUTH_FILE, DOCKER_CONFIG) with an entry for "
                f"{self.location.registry}"
            )
        if status == 403:
            return FetchError(f"{where}: {self.server} denied pulling {self.location.repository!r} ({said})")
        return FetchError(f"{where}: {self.server} answered {said}")


def _error_fields(body: bytes) -> tuple[str, str]:
    """The first error's code and message of a distribution API error; ("", its first line) when it is not one."""
    try:
        error = answers.parsed(body, "the error")["errors"][0]  # Malformed is a ValueError
        return str(error.get("code", ""))[:100], str(error.get("message", ""))[:300]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        text = body.decode(errors="replace").strip()
        return "", text.splitlines()[0][:200] if text else ""
