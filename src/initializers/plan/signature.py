"""The publisher's signature checked against what landed, before the manifest is written (SIGNATURE).

The envelope is verified by model_signing (`adapters.model_signing`); then every file it lists is compared with
the digest the fetch already verified (a Hub LFS file's or an S3 object's SHA-256: no byte is read again), else the
landed file is hashed once in the signer's algorithm. Paths must match both ways: a signed file that did not land is
missing (or, when the user's patterns left it out, reported as not fetched), a landed file the signature does not
list and the signer's ignore rules do not cover is added. The signature file itself is never compared.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from initializers.common.remote_file import Checksum
from initializers.config.signing import ENFORCE, SigningOptions

_BLOCK_BYTES = 1 << 20
#: Signed files not fetched, named in the manifest and the log (the count is always given).
NAMED = 20


@dataclass(frozen=True)
class Verdict:
    """What the check found: `reason`, one sentence, is None when the signature verified over what was fetched."""

    mode: str
    method: str
    signature_path: str
    signer: str | None = None
    reason: str | None = None
    #: Signed files the user's patterns left out: reported, not failed.
    not_fetched: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return self.reason is None

    @property
    def fails_the_run(self) -> bool:
        return self.mode == ENFORCE and not self.verified

    def record(self) -> dict[str, Any]:
        """The manifest's `signature` entry."""
        record: dict[str, Any] = {
            "mode": self.mode,
            "method": self.method,
            "path": self.signature_path,
            "signer": self.signer,
            "verdict": "verified" if self.verified else "failed",
        }
        if self.reason is not None:
            record["reason"] = self.reason
        if self.not_fetched:
            record["not_fetched"] = {"files": len(self.not_fetched), "first": list(self.not_fetched[:NAMED])}
        return record


def check(
    options: SigningOptions,
    root: Path,
    landed: Iterable[tuple[str, Checksum | None]],
    left_out: frozenset[str],
    check_stop: Callable[[], None],
) -> Verdict:
    """The verdict on the files at `root`: `landed`, each path with the digest its fetch verified (None: none in a
    usable algorithm); `left_out`: the paths the user's patterns did not select; `check_stop` is called between the
    blocks of a file hashed again (a long wait on a large model), to raise a stop requested meanwhile."""
    method, trust = options.trust()
    signature_path = options.relative_path()
    verdict = Verdict(options.signature, method, signature_path)
    digests = dict(landed)
    if signature_path not in digests:
        return replace(verdict, reason=f"the model is unsigned: the source has no {signature_path} (SIGNATURE_PATH)")
    del digests[signature_path]
    from initializers.adapters.model_signing import SignatureInvalid, verified

    try:
        signed = verified(root / signature_path, method, Path(trust))
    except SignatureInvalid as exc:
        return replace(verdict, reason=f"{signature_path}: {exc}")
    verdict = replace(verdict, signer=signed.signer)
    by_file = _by_file(signed.resources)
    algorithm = signed.hash_type
    if algorithm not in hashlib.algorithms_available:
        return replace(verdict, reason=f"{signature_path} hashes files with {signed.hash_type}, not supported")
    ignored = [PurePosixPath(path) for path in signed.ignore_paths]
    for path in sorted(digests):
        if path not in by_file and not any(PurePosixPath(path).is_relative_to(rule) for rule in ignored):
            return replace(verdict, reason=f"file added: {path} is not in the signature")
    both = sorted(path for path in by_file if path in digests)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # hashlib lets go of the GIL: files hash side by side
        found = pool.map(lambda path: _matches(root / path, by_file[path], algorithm, digests[path], check_stop), both)
        matches = dict(zip(both, found, strict=True))
    not_fetched = []
    for path in sorted(by_file):
        if path in digests:
            if not matches[path]:
                return replace(verdict, reason=f"digest mismatch: {path} is not the file the publisher signed")
        elif path in left_out:
            not_fetched.append(path)
        else:
            return replace(verdict, reason=f"file missing: {path} is signed but not in the source")
    return replace(verdict, not_fetched=tuple(not_fetched))


def _by_file(resources: dict[str, str]) -> dict[str, dict[tuple[int, int] | None, str]]:
    """The signed digests per file: {None: digest} for a whole file, {(start, end): digest} for its shards."""
    files: dict[str, dict[tuple[int, int] | None, str]] = {}
    for name, digest in resources.items():
        path, _, span = name.partition(":")
        start, _, end = span.partition(":")
        files.setdefault(path, {})[(int(start), int(end)) if span else None] = digest
    return files


def _matches(
    path: Path,
    signed: dict[tuple[int, int] | None, str],
    algorithm: str,
    fetched: Checksum | None,
    check_stop: Callable[[], None],
) -> bool:
    """The landed file hashes to what was signed: by the fetch's digest when it is in the signer's algorithm and the
    signer hashed the whole file, else by hashing the file (each signed shard, or whole)."""
    if None in signed and fetched is not None and fetched.algorithm == algorithm:
        return fetched.hexdigest == signed[None]
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        spans = sorted((span or (0, size)) for span in signed)
        if spans[0][0] != 0 or spans[-1][1] != size or any(a[1] != b[0] for a, b in itertools.pairwise(spans)):
            return False  # the signed shards do not tile the file: it is not the size that was signed
        return all(
            _digest(handle, span, algorithm, check_stop) == signed[span if span in signed else None] for span in spans
        )


def _digest(handle: Any, span: tuple[int, int], algorithm: str, check_stop: Callable[[], None]) -> str:
    hasher = hashlib.new(algorithm)
    handle.seek(span[0])
    remaining = span[1] - span[0]
    while remaining > 0 and (block := handle.read(min(_BLOCK_BYTES, remaining))):
        check_stop()
        hasher.update(block)
        remaining -= len(block)
    return hasher.hexdigest()
