"""The digest a web server vouches for a file with, read from an answer's head: `Repr-Digest` (RFC 9530, the
representation's, whatever range the answer carries) or the older `Digest` (RFC 3230), SHA-256 or SHA-512; else, for
an answer carrying the whole file, `Content-MD5`. `Content-Digest` is the answer body's (a range's): not the file's.
"""

from __future__ import annotations

import re

from initializers.common.remote_file import Checksum, base64_digest
from initializers.sources.http.http1 import Response

#: The algorithms read, by their names in those headers, with our name and their digest's length.
_ALGORITHMS = {"sha-256": ("sha256", 32), "sha-512": ("sha512", 64)}
#: One member of a digest header: `sha-256=:BASE64:` (a structured field's byte sequence) or `SHA-256=BASE64`.
_MEMBER = re.compile(r"\s*([A-Za-z0-9-]+)\s*=\s*:?([A-Za-z0-9+/=]*):?\s*(?:;.*)?")


def vouched(response: Response, whole: bool) -> Checksum | None:
    """The file's digest `response`'s head gives (`whole`: its body is the whole file); None when it gives none."""
    for header in ("repr-digest", "digest"):
        for member in (response.header(header) or "").split(","):
            found = _MEMBER.fullmatch(member)
            known = _ALGORITHMS.get(found[1].lower()) if found else None
            if found and known and (digest := base64_digest(found[2], known[1])) is not None:
                return Checksum(known[0], digest.hex())
    md5 = response.header("content-md5")
    digest = base64_digest(md5.strip(), 16) if whole and md5 else None
    return Checksum("md5", digest.hex()) if digest is not None else None
