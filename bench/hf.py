"""Hub side by side: this tool vs huggingface_hub's own `hf download` (snapshot_download) with default settings.

Both fetch from our local Hub server. Run with `make bench-hf` (BENCH_ROUNDS, BENCH_OUT, BENCH_SETS: M for
all-MiniLM-L6-v2, L for a repo with one 1 GiB LFS file and 500 small files, T for L over TLS: both of the server's
origins over HTTPS with a certificate made for the run, trusted through SSL_CERT_FILE as `trust` says; BENCH_BEFORE
for the code before a change beside ours, `harness.with_before`).
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

from bench.harness import Result, measure, run_alone
from devkit.hubserver import HubServer
from devkit.samples import MINILM_REPO, minilm_files

MiB = 1 << 20
BIN = Path(sys.executable).parent


def _large_repo(scratch: Path, quick: bool) -> dict[str, Path | bytes]:
    """One 1 GiB LFS file and 500 small ones (quick: 256 MiB and 100)."""
    blob = scratch / "large.safetensors"
    with open(blob, "wb") as handle:
        for _ in range(256 if quick else 1024):
            handle.write(os.urandom(MiB))
    small = 100 if quick else 500
    return {"model.safetensors": blob, **{f"tokens/{i:04d}.json": os.urandom(2000 + i) for i in range(small)}}


def trust(hub: HubServer) -> dict[str, str]:
    """How both tools trust a Hub served over TLS with a certificate of its own: SSL_CERT_FILE, which our program reads
    (HUB_TRUST) and huggingface_hub's httpx2 too (requests' REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE it no longer uses)."""
    return {"SSL_CERT_FILE": str(hub.certificate)} if hub.certificate else {}


def ours(hub: HubServer, repo: str, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {"STORAGE_URI": f"hf://{repo}", "OUTPUT_PATH": str(out), "HF_ENDPOINT": hub.endpoint, "IGNORE_PATTERNS": ""}
    return [str(BIN / "model-initializer")], {**env, **trust(hub)}


def hf_download(hub: HubServer, repo: str, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(out / ".cache" / "home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    return [str(BIN / "hf"), "download", repo, "--local-dir", str(out), "--quiet"], {**env, **trust(hub)}


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    results = []
    large = partial(_large_repo, out_root, quick)
    sets = {
        "M": (MINILM_REPO, minilm_files, False),
        "L": ("bench/large", large, False),
        "T": ("bench/large", large, True),
    }
    for key in os.environ.get("BENCH_SETS", "MLT"):
        repo, files, tls = sets[key]
        with HubServer(tls=tls) as hub:
            content = files()
            hub.add_repo(repo, content)
            total = sum(v.stat().st_size if isinstance(v, Path) else len(v) for v in content.values())
            contenders = {"initializers": partial(ours, hub, repo), "hf download": partial(hf_download, hub, repo)}
            samples = measure(key, contenders, total, out_root, rounds, rerun="initializers")
            title = f"Hub {repo} ({len(content)} files{', over TLS' if tls else ''})"
            results.append(Result(title, total, samples, peer="hf download"))
    return results


if __name__ == "__main__":
    run_alone(suite)
