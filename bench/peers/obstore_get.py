"""obstore (Python over Rust's `object_store`): every object of a bucket downloaded to a file of its own, eight
objects or ranges at a time in threads (its calls leave the interpreter lock while Rust works).

`python -m bench.peers.obstore_get ENDPOINT BUCKET OUTPUT [ranged]`, credentials and region from AWS_* variables,
the CA of an https ENDPOINT from AWS_CA_BUNDLE when it is set (handed to obstore as `client_options`'
`root_certificate`, the way its users trust a private CA; verification stays on).

One stream (the default): `obstore.get` per object, its body streamed to the file in obstore's default chunks
(10 MiB). `ranged`: every object cut into 16 MiB ranges, each read by `obstore.get_range` and written at its offset
(`os.pwrite`), as a user parallelises one large object (16 MiB x 8 at a time, as the curl ceiling does). obstore
verifies no checksum of what it reads.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import obstore
from obstore.store import S3Store

RANGE = 16 << 20
PARALLEL = 8


def store(endpoint: str, bucket: str) -> S3Store:
    options: dict[str, Any] = {"allow_http": True} if endpoint.startswith("http:") else {}
    if bundle := os.environ.get("AWS_CA_BUNDLE"):
        options["root_certificate"] = Path(bundle).read_bytes()
    return S3Store(bucket, endpoint=endpoint, virtual_hosted_style_request=False, client_options=options)


def streamed(s3: S3Store, key: str, path: str) -> None:
    with open(path, "wb") as handle:
        for chunk in obstore.get(s3, key).stream():
            handle.write(chunk)


def ranged(s3: S3Store, key: str, size: int, path: str, pool: ThreadPoolExecutor) -> list[Any]:
    """The object's ranges submitted to `pool`, written into a file of its full size."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(descriptor, size)

    def part(start: int) -> None:
        os.pwrite(descriptor, obstore.get_range(s3, key, start=start, end=min(start + RANGE, size)), start)

    return [pool.submit(part, start) for start in range(0, size, RANGE)] + [descriptor]


def main(endpoint: str, bucket: str, output: str, mode: str = "stream") -> None:
    s3 = store(endpoint, bucket)
    objects = [(meta["path"], meta["size"]) for batch in obstore.list(s3) for meta in batch]
    with ThreadPoolExecutor(PARALLEL) as pool:
        work: list[Any] = []
        descriptors = []
        for key, size in objects:
            path = os.path.join(output, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if mode == "ranged" and size:
                *parts, descriptor = ranged(s3, key, size, path, pool)
                work += parts
                descriptors.append(descriptor)
            elif mode == "ranged":
                Path(path).touch()
            else:
                work.append(pool.submit(streamed, s3, key, path))
        for future in work:
            future.result()
    for descriptor in descriptors:
        os.close(descriptor)


if __name__ == "__main__":
    main(*sys.argv[1:5])
