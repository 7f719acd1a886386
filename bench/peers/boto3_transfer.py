"""boto3's TransferManager, tuned (16 MiB parts, 16 threads): what a Python user reaches for.

`python -m bench.peers.boto3_transfer ENDPOINT BUCKET OUTPUT`, credentials from AWS_* variables.
"""

from __future__ import annotations

import os
import sys

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from s3transfer.manager import TransferManager

MiB = 1 << 20


def main(endpoint: str, bucket: str, output: str) -> None:
    client = boto3.client(
        "s3", endpoint_url=endpoint, config=Config(max_pool_connections=32, s3={"addressing_style": "path"})
    )
    config = TransferConfig(multipart_threshold=16 * MiB, multipart_chunksize=16 * MiB, max_concurrency=16)
    futures = []
    with TransferManager(client, config) as manager:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", ()):
                path = os.path.join(output, obj["Key"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                futures.append(manager.download(bucket, obj["Key"], path))
        for future in futures:
            future.result()


if __name__ == "__main__":
    main(*sys.argv[1:4])
