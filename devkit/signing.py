"""Models signed as a publisher signs them, with the `model_signing` package: an elliptic-curve key pair, or a
certificate chain (a root CA and a signing certificate it issued), all made here with `cryptography`."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SIGNATURE = "model.sig"


@dataclass(frozen=True)
class Keys:
    """PEM files: the private key signs; `public` (SIGNATURE_PUBLIC_KEY) or `chain` (SIGNATURE_CERTIFICATE_CHAIN,
    the root CA) verifies; `certificate`: the signing certificate, None for plain key signing."""

    private: Path
    public: Path
    certificate: Path | None = None
    chain: Path | None = None


def _write_key(folder: Path, name: str) -> tuple[ec.EllipticCurvePrivateKey, Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / f"{name}.key", folder / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key, private, public


def key_pair(folder: Path, name: str = "signer") -> Keys:
    folder.mkdir(parents=True, exist_ok=True)
    _, private, public = _write_key(folder, name)
    return Keys(private, public)


def certificate_chain(folder: Path, name: str = "publisher") -> Keys:
    """A root CA and a signing certificate (digitalSignature) it issued for a new key."""
    folder.mkdir(parents=True, exist_ok=True)
    root_key, _, _ = _write_key(folder, f"{name}-root")
    key, private, public = _write_key(folder, name)
    now = datetime.datetime.now(datetime.UTC)
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} root CA")])
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(root_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} signing")]))
        .issuer_name(root_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .sign(root_key, hashes.SHA256())
    )
    certificate, chain = folder / f"{name}.crt", folder / f"{name}-root.crt"
    certificate.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    chain.write_bytes(root.public_bytes(serialization.Encoding.PEM))
    return Keys(private, public, certificate, chain)


def _usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def sign(model: Path, keys: Keys, signature: str = SIGNATURE, shard_size: int | None = None) -> Path:
    """Sign the model folder as `model_signing sign` does (the signature file and git's files left out), writing
    the signature at `model / signature`; `shard_size`: sign shards of that many bytes instead of whole files."""
    from model_signing import hashing, signing

    hashing_config = hashing.Config().set_ignored_paths(paths=[signature])
    if shard_size is not None:
        hashing_config.use_shard_serialization(shard_size=shard_size)
    config = signing.Config().set_hashing_config(hashing_config)
    if keys.certificate is not None and keys.chain is not None:
        config.use_certificate_signer(
            private_key=keys.private, signing_certificate=keys.certificate, certificate_chain=[keys.chain]
        )
    else:
        config.use_elliptic_key_signer(private_key=keys.private)
    target = model / signature
    target.parent.mkdir(parents=True, exist_ok=True)
    config.sign(model, target)
    return target


def signed_model(folder: Path, keys: Keys, files: dict[str, bytes], **how: Any) -> dict[str, bytes]:
    """`files` written under `folder` and signed there (`how`: `sign`'s options): the files and their signature, by
    path, as a publisher uploads them."""
    for path, content in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(content)
    signature = sign(folder, keys, **how)
    return {**files, signature.relative_to(folder).as_posix(): signature.read_bytes()}
