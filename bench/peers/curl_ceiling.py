"""The ceiling: parallel SigV4-signed ranged GETs by curl, bytes discarded, nothing written, nothing verified.

`python -m bench.peers.curl_ceiling ENDPOINT BUCKET KEYS_FILE` where KEYS_FILE lists `key size` lines; credentials
from AWS_* variables, the CA of an https ENDPOINT from AWS_CA_BUNDLE when it is set (`--cacert`). Exits non-zero
unless curl received exactly the listed bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

PART = 16 << 20
PARALLEL = 8


def main(endpoint: str, bucket: str, keys_file: str) -> None:
    # Per-transfer options: `next` resets them, so every transfer carries its own signing and report.
    per_transfer = [
        f'aws-sigv4 = "aws:amz:{os.environ["AWS_REGION"]}:s3"',
        f'user = "{os.environ["AWS_ACCESS_KEY_ID"]}:{os.environ["AWS_SECRET_ACCESS_KEY"]}"',
        'write-out = "%{size_download}\\n"',
        "fail",
        *([f'cacert = "{os.environ["AWS_CA_BUNDLE"]}"'] if "AWS_CA_BUNDLE" in os.environ else []),
    ]
    expected = 0
    transfers = []
    for line in Path(keys_file).read_text().splitlines():
        key, size = line.rsplit(" ", 1)
        expected += int(size)
        for start in range(0, int(size), PART):
            end = min(start + PART, int(size)) - 1
            url = f'url = "{endpoint}/{bucket}/{quote(key)}"'
            transfers.append([url, f'range = "{start}-{end}"', 'output = "/dev/null"', *per_transfer])
    with tempfile.NamedTemporaryFile("w", suffix=".curlrc") as config:
        config.write("\nnext\n".join("\n".join(t) for t in transfers) + "\n")
        config.flush()
        done = subprocess.run(
            [
                "curl",
                "--silent",
                "--show-error",
                "--parallel",
                "--parallel-max",
                str(PARALLEL),
                "--config",
                config.name,
            ],
            capture_output=True,
            text=True,
        )
    received = sum(int(n) for n in done.stdout.split())
    if done.returncode != 0 or received != expected:
        sys.exit(f"curl: exit {done.returncode}, received {received} of {expected} bytes: {done.stderr[-500:]}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
