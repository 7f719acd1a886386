"""AZURE_STORAGE_CONNECTION_STRING read as Azure's SDKs read it (keys in any case; `BlobEndpoint` wins when given, as in
the SDKs: Azurite, private endpoints, other clouds; `UseDevelopmentStorage=true` is the emulator's well-known account).
Pure functions, no I/O. A message never shows a value; the logs hide only the key and the signature (`secret_parts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from initializers.common.errors import ConfigError

VARIABLE = "AZURE_STORAGE_CONNECTION_STRING"
#: The development account of Azure's storage emulators (Azurite): a public, documented name, key and endpoint.
_DEVELOPMENT = {
    "ACCOUNTNAME": "devstoreaccount1",
    "ACCOUNTKEY": "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    "BLOBENDPOINT": "http://127.0.0.1:10000/devstoreaccount1",
}


@dataclass(frozen=True)
class ConnectionString:
    """What a connection string says of the blob service: where, which account, and its credential if any."""

    endpoint: str
    account: str | None
    key: str | None
    sas: str | None

    def __repr__(self) -> str:  # never show the credential, even in a traceback
        return f"ConnectionString(endpoint={self.endpoint!r}, account={self.account!r})"


def parse_connection_string(text: str) -> ConnectionString:
    """The blob service's side of `text`; a ConfigError naming the variable (never the value) when it is unusable."""
    fields: dict[str, str] = {}
    for part in text.strip().split(";"):
        if not part.strip():
            continue
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise ConfigError(f"{VARIABLE}: a part is not of the form name=value (value not shown)")
        fields[name.strip().upper()] = value.strip()
    if fields.get("USEDEVELOPMENTSTORAGE", "").lower() == "true":
        fields = {**_DEVELOPMENT, **fields}
    account = fields.get("ACCOUNTNAME") or None
    endpoint = fields.get("BLOBENDPOINT") or None
    if endpoint is None:
        if account is None:
            raise ConfigError(f"{VARIABLE}: names neither a blob endpoint nor an account name (value not shown)")
        protocol = fields.get("DEFAULTENDPOINTSPROTOCOL") or "https"
        endpoint = f"{protocol}://{account}.blob.{fields.get('ENDPOINTSUFFIX') or 'core.windows.net'}"
    key, sas = fields.get("ACCOUNTKEY") or None, fields.get("SHAREDACCESSSIGNATURE") or None
    if key and sas:
        raise ConfigError(f"{VARIABLE}: holds both an account key and a shared access signature: give one credential")
    return ConnectionString(endpoint.rstrip("/"), account, key, sas)


def secret_parts(text: str) -> list[str]:
    """What the logs hide of a connection string: its key and signature; all of it when unreadable (parts unknown)."""
    try:
        connection = parse_connection_string(text)
    except ConfigError:
        return [text]
    return [part for part in (connection.key, connection.sas) if part]
