"""model_signing's verifiers, called below its public `verifying.Config.verify`: that one re-hashes the whole model,
while a run already holds a verified digest of every file; so the envelope is checked here with the library's own
verifiers, and what it signed is handed back as plain data for the run to compare. Read against 1.1; imported only when
SIGNATURE is not off."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import io
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from initializers.adapters import require
from initializers.common.errors import ConfigError


class SignatureInvalid(Exception):
    """The signature file cannot be read, or its envelope does not verify against the configured trust."""


@dataclass(frozen=True)
class Signed:
    """What the envelope vouches for, once its signature verified."""

    #: Who signed: the key's fingerprint, or the signing certificate's subject.
    signer: str
    #: The algorithm of every digest, files and shards alike ("sha256", "blake2b", "blake3").
    hash_type: str
    #: Paths (relative to the model root) the signer left out of the manifest, folders included.
    ignore_paths: tuple[str, ...]
    #: Each resource the signer listed (a path, or "path:start:end" for a shard) -> its hex digest.
    resources: dict[str, str]


def verified(signature_path: Path, method: str, trust_path: Path) -> Signed:
    """The envelope at `signature_path` checked against the key (`method` "key") or the certificate chain
    ("certificate") at `trust_path`; SignatureInvalid naming the reason otherwise."""
    try:
        document = json.loads(signature_path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise SignatureInvalid(f"the signature file is not JSON ({exc})") from None
    sign_certificate, sign_ec_key, sign_sigstore_pb = _verifiers()
    try:
        signature = sign_sigstore_pb.Signature.read(signature_path)
    except Exception as exc:  # the library raises whatever its parsers do
        raise SignatureInvalid(f"the signature file is not a model signature bundle ({exc!r})") from None
    trust = "SIGNATURE_PUBLIC_KEY" if method == "key" else "SIGNATURE_CERTIFICATE_CHAIN"
    try:
        if method == "key":
            verifier: Any = sign_ec_key.Verifier(trust_path)
            signer = "key sha256:" + hashlib.sha256(_public_key_pem(trust_path)).hexdigest()
        else:
            verifier = sign_certificate.Verifier([trust_path])
    except Exception as exc:  # the key or the chain does not load
        raise ConfigError(f"{trust}: {str(trust_path)!r} is not a usable PEM file ({type(exc).__name__})") from None
    if method != "key":
        signer = _certificate_subject(document)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its warnings are print()s: stdout is for data
            manifest = verifier.verify(signature)
    except Exception as exc:  # InvalidSignature, ValueError, OpenSSL's errors: all mean the same here
        raise SignatureInvalid(f"the signature does not verify against {trust} ({type(exc).__name__}: {exc})") from None
    serialization = manifest.serialization_type
    return Signed(
        signer=signer,
        hash_type=serialization["hash_type"],
        ignore_paths=tuple(str(path) for path in serialization.get("ignore_paths", ())),
        resources={rd.identifier: rd.digest.digest_hex for rd in manifest.resource_descriptors()},
    )


def _verifiers() -> tuple[Any, Any, Any]:
    """model_signing's key and certificate verifiers and its bundle reader, without the package's `__init__`: that
    one imports its signers too, and with them sigstore, tuf and boto3 (far more CPU than these modules need:
    bench/results.md). The package stands in as a bare namespace unless something imported it whole already."""
    spec = importlib.util.find_spec("model_signing")
    if spec is None or spec.submodule_search_locations is None:
        raise ConfigError("SIGNATURE needs model_signing, which is not installed: install initializers[signing]")
    require("model-signing", "1.1", "1.2")
    if "model_signing" not in sys.modules:
        package = types.ModuleType("model_signing")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["model_signing"] = package
    from model_signing._signing import sign_certificate, sign_ec_key, sign_sigstore_pb

    return sign_certificate, sign_ec_key, sign_sigstore_pb


def _public_key_pem(path: Path) -> bytes:
    """The key as the library fingerprints it (its SubjectPublicKeyInfo PEM), however the file lays it out."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_public_key(path.read_bytes())
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _certificate_subject(document: Any) -> str:
    """The signing certificate's subject, from the bundle's chain (its first certificate)."""
    from cryptography import x509

    try:
        raw = document["verificationMaterial"]["x509CertificateChain"]["certificates"][0]["rawBytes"]
        return "certificate " + x509.load_der_x509_certificate(base64.b64decode(raw)).subject.rfc4514_string()
    except (KeyError, IndexError, TypeError, ValueError):
        raise SignatureInvalid("the signature carries no signing certificate") from None
