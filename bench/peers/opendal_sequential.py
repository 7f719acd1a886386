"""The original Kubeflow initializer's approach: Apache OpenDAL lists, then reads each whole object, one at a time.

`python -m bench.peers.opendal_sequential ENDPOINT BUCKET OUTPUT`, credentials from AWS_* variables.
"""

from __future__ import annotations

import os
import sys

import opendal


def main(endpoint: str, bucket: str, output: str) -> None:
    operator = opendal.Operator(
        "s3",
        bucket=bucket,
        endpoint=endpoint,
        region=os.environ["AWS_REGION"],
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    )
    for entry in operator.list("/", recursive=True):
        if entry.path.endswith("/"):
            continue
        path = os.path.join(output, entry.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = operator.read(entry.path)  # the whole object in memory, as the original does
        with open(path, "wb") as handle:
            handle.write(data)


if __name__ == "__main__":
    main(*sys.argv[1:4])
