"""`make images` and the image tests: build both images with podman (or docker), from a local stand-in base.

First the steps both images share (images/common/Dockerfile, context: the repository root) as a local image, then
each image from its own folder (images/<kind>-initializer/, its Dockerfile FROM that image, given as COMMON_IMAGE).
No container registry is reachable here, so the base (Debian bookworm with Python 3.11, the host's CA bundle for
the TLS-intercepting proxy) is made with mmdebstrap and imported once; images/common/Dockerfile takes it as
BASE_IMAGE and defaults to the official Python slim image everywhere else. Set BASE_IMAGE to build on another base.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "images"
STAND_IN_BASE = "localhost/initializers-base:py311"
COMMON = "localhost/initializers-common:dev"  # the shared steps, what each image's Dockerfile builds FROM
KINDS = ("dataset", "model")
_PACKAGES = ("podman", "runc", "mmdebstrap", "slirp4netns")  # slirp4netns: the played pods' network (devkit/pods.py)


def tag(kind: str) -> str:
    return f"localhost/{kind}-initializer:dev"


def engine_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(REPO / "devkit" / "containers.conf")}


def engine() -> str:
    """podman if it is there or can be installed (Debian, as root); else a working docker; else a clear exit."""
    if all(shutil.which(tool) for tool in _PACKAGES):
        return "podman"
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "info"], capture_output=True).returncode == 0:
        return "docker"
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *_PACKAGES], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})  # fmt: skip
        return "podman"
    sys.exit("neither podman nor a running docker is available: install podman (apt-get install podman runc) or docker")


def ensure_stand_in_base(runtime: str) -> str:
    """The local base image, made once per machine (about 35 s) and reused by later builds."""
    if subprocess.run([runtime, "image", "exists", STAND_IN_BASE], env=engine_env()).returncode == 0:
        return STAND_IN_BASE
    with tempfile.TemporaryDirectory() as scratch:
        tar = Path(scratch) / "base.tar"
        subprocess.run(
            ["mmdebstrap", "--quiet", "--variant=apt",
             "--include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates",
             "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
             '--customize-hook=rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
             '--customize-hook=cp /etc/ssl/certs/ca-certificates.crt "$1"/etc/ssl/certs/ca-certificates.crt',
             '--customize-hook=rm -rf "$1"/var/lib/apt/lists/*',
             "bookworm", str(tar), "http://deb.debian.org/debian"],
            check=True,
        )  # fmt: skip
        subprocess.run([runtime, "import", "-q", "--change", 'CMD ["python3"]', str(tar), STAND_IN_BASE],
                       check=True, env=engine_env())  # fmt: skip
    return STAND_IN_BASE


def _build(runtime: str, image: str, dockerfile: Path, context: Path, build_args: dict[str, str]) -> str:
    arguments = [word for name, value in build_args.items() for word in ("--build-arg", f"{name}={value}")]
    subprocess.run(
        [runtime, "build", "-q", "--pull=never", "--network", "host", *arguments, "-t", image, "-f", str(dockerfile),
         str(context)],
        check=True, env=engine_env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return image


def build_common(runtime: str, base: str) -> str:
    """The steps both images share, as the local image their Dockerfiles build FROM."""
    return _build(runtime, COMMON, IMAGES / "common" / "Dockerfile", REPO, {"BASE_IMAGE": base})


def build(runtime: str, kind: str) -> str:
    """One image from its own folder, on the common image (build_common first)."""
    folder = IMAGES / f"{kind}-initializer"
    return _build(runtime, tag(kind), folder / "Dockerfile", folder, {"COMMON_IMAGE": COMMON})


#: Held while images are built: the tests' workers (pytest-xdist), each with its own `runtime` fixture, and any other
#: `make images` on the machine build one at a time (the engine's storage and tags are the machine's), the later ones
#: from the layer cache.
BUILD_LOCK = Path("/tmp/initializers-images.lock")


def build_all() -> str:
    """Build both images, one build on the machine at a time; returns the container engine used."""
    with BUILD_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        runtime = engine()
        base = os.environ.get("BASE_IMAGE") or ensure_stand_in_base(runtime)
        build_common(runtime, base)
        for kind in KINDS:
            build(runtime, kind)
    return runtime


if __name__ == "__main__":
    used = build_all()
    print(f"built {', '.join(tag(kind) for kind in KINDS)} with {used}")
