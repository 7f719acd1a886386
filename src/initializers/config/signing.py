"""Whether and how a run checks the publisher's signature (OpenSSF model signing), declared once here: a source
whose files are published includes this group, one that makes its files does not (they are made here, not published).

The trust is given as files (a mounted Secret or ConfigMap), never as PEM text in a variable: a variable cannot
carry a PEM's newlines, and a path keeps the key out of the pod spec and the logs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from initializers.common.errors import ConfigError
from initializers.config.settings import choice, setting_field

OFF, WARN, ENFORCE = "off", "warn", "enforce"
DEFAULT_SIGNATURE_PATH = "model.sig"


@dataclass(frozen=True)
class SigningOptions:
    signature: str = setting_field(
        "SIGNATURE",
        lambda kind: (
            f"Check the publisher's signature of the {kind.name} (OpenSSF model signing) before the "
            "manifest is written: off, warn (record the verdict, complete anyway) or enforce (any failure: exit 1, no "
            "manifest, nothing left to load) [default: off]."
        ),
        choice(OFF, WARN, ENFORCE),
        default=OFF,
    )
    signature_path: str | None = setting_field(
        "SIGNATURE_PATH",
        f"The signature file, relative to the source root; fetched whatever the patterns say [default: "
        f"{DEFAULT_SIGNATURE_PATH}].",
    )
    signature_public_key: str | None = setting_field(
        "SIGNATURE_PUBLIC_KEY",
        "Path to the signer's PEM public key (elliptic curve), e.g. a mounted Secret or ConfigMap file.",
    )
    signature_certificate_chain: str | None = setting_field(
        "SIGNATURE_CERTIFICATE_CHAIN",
        "Path to a PEM file of the certificates that the signing certificate must chain to (instead of "
        "SIGNATURE_PUBLIC_KEY).",
    )

    @property
    def enabled(self) -> bool:
        return self.signature != OFF

    def relative_path(self) -> str:
        """The signature file's path under the source root, checked: relative, inside it."""
        path = self.signature_path or DEFAULT_SIGNATURE_PATH
        parts = PurePosixPath(path).parts
        if path.startswith("/") or not parts or ".." in parts:
            raise ConfigError(f"SIGNATURE_PATH: {path!r} must be a path relative to the source root, without '..'")
        return PurePosixPath(path).as_posix()

    def trust(self) -> tuple[str, str]:
        """(method, path): exactly one of the key and the chain, readable; else a ConfigError naming the variable."""
        key = ("key", "SIGNATURE_PUBLIC_KEY", self.signature_public_key)
        chain = ("certificate", "SIGNATURE_CERTIFICATE_CHAIN", self.signature_certificate_chain)
        given = [trust for trust in (key, chain) if trust[2]]
        if len(given) != 1:
            raise ConfigError(
                f"SIGNATURE={self.signature} needs exactly one of SIGNATURE_PUBLIC_KEY and SIGNATURE_CERTIFICATE_CHAIN "
                f"(the path of a PEM file), {'both are' if given else 'neither is'} set"
            )
        method, variable, path = given[0]
        if not os.access(path, os.R_OK) or not os.path.isfile(path):
            raise ConfigError(f"{variable}: {path!r} is not a readable file")
        return method, path
