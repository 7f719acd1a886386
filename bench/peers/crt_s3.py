"""The AWS Common Runtime's S3 client (`awscrt.s3.S3Client`), the engine of Mountpoint, s3torchconnector and
`boto3[crt]`: every object of a bucket downloaded to a file of its own, all of them handed to the client at once.

`python -m bench.peers.crt_s3 ENDPOINT BUCKET OUTPUT`, credentials from AWS_* variables, the CA of an https ENDPOINT
from AWS_CA_BUNDLE when it is set (through the CRT's own TLS options, as its users pass a private CA).

At the client's defaults: its part size and throughput target (10 Gbps) choose the parts and connections, it writes
each object straight to its file (`recv_filepath`), and it validates no checksum (a GET's response checksums are
checked only when a `checksum_config` asks for it). The listing is the CRT's too: ListObjectsV2 pages through the
same client (a DEFAULT meta request, signed by it), parsed with the standard library.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ElementTree
from concurrent.futures import Future
from urllib.parse import quote, urlencode, urlsplit

from awscrt.auth import AwsCredentialsProvider
from awscrt.http import HttpHeaders, HttpRequest
from awscrt.io import ClientTlsContext, TlsContextOptions
from awscrt.s3 import S3Client, S3RequestTlsMode, S3RequestType, create_default_s3_signing_config

_S3 = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def client(endpoint: str) -> S3Client:
    region = os.environ["AWS_REGION"]
    credentials = AwsCredentialsProvider.new_environment()
    signing = create_default_s3_signing_config(region=region, credential_provider=credentials)
    if urlsplit(endpoint).scheme == "http":
        return S3Client(region=region, signing_config=signing, tls_mode=S3RequestTlsMode.DISABLED)
    options = TlsContextOptions()
    if bundle := os.environ.get("AWS_CA_BUNDLE"):
        options.override_default_trust_store_from_path(ca_filepath=bundle)
    tls = ClientTlsContext(options).new_connection_options()
    return S3Client(
        region=region, signing_config=signing, tls_mode=S3RequestTlsMode.ENABLED, tls_connection_options=tls
    )


def _request(host: str, path: str) -> HttpRequest:
    return HttpRequest("GET", path, HttpHeaders([("Host", host)]))


def _done(future: Future[None], what: str) -> object:
    def on_done(error: BaseException | None = None, status_code: int | None = None, **_: object) -> None:
        if error is not None:
            future.set_exception(RuntimeError(f"{what}: {error!r} (HTTP {status_code})"))
        else:
            future.set_result(None)

    return on_done


def _read(s3: S3Client, request: HttpRequest, operation: str) -> bytes:
    """The body of one plain (not split) request."""
    body = bytearray()
    done: Future[None] = Future()
    s3.make_request(
        type=S3RequestType.DEFAULT,
        operation_name=operation,
        request=request,
        on_body=lambda chunk, **_: body.extend(chunk),
        on_done=_done(done, operation),
    )
    done.result()
    return bytes(body)


def listing(s3: S3Client, host: str, bucket: str) -> list[str]:
    """Every key of the bucket, page by page."""
    keys: list[str] = []
    token = ""
    while True:
        query = {"list-type": "2", **({"continuation-token": token} if token else {})}
        page = ElementTree.fromstring(_read(s3, _request(host, f"/{bucket}?{urlencode(query)}"), "ListObjectsV2"))
        keys += [element.text or "" for element in page.iter(f"{_S3}Key")]
        token = page.findtext(f"{_S3}NextContinuationToken") or ""
        if page.findtext(f"{_S3}IsTruncated") != "true":
            return keys


def main(endpoint: str, bucket: str, output: str) -> None:
    s3 = client(endpoint)
    host = urlsplit(endpoint).netloc
    downloads = []
    for key in listing(s3, host, bucket):
        path = os.path.join(output, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        done: Future[None] = Future()
        request = s3.make_request(
            type=S3RequestType.GET_OBJECT,
            request=_request(host, f"/{bucket}/{quote(key, safe='/~')}"),
            recv_filepath=path,
            on_done=_done(done, key),
        )
        downloads.append((request, done))  # the request kept alive until it is done
    for _alive, done in downloads:
        done.result()


if __name__ == "__main__":
    main(*sys.argv[1:4])
