"""How to reach Azure Blob Storage: the variables Azure's tools read (the az CLI, the SDKs' connection strings), read
by `access`; and those azure-identity reads itself, for Microsoft Entra tokens."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.config.settings import setting_field
from initializers.sources.azure.connection_string import secret_parts

#: What azure-identity reads for a Microsoft Entra token, and the CA certificates our connections read.
ENTRA_VARIABLES = ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST",
                   "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "IDENTITY_ENDPOINT", "IDENTITY_HEADER",
                   "MSI_ENDPOINT", "SSL_CERT_FILE")  # fmt: skip


@dataclass(frozen=True)
class AzureOptions:
    connection_string: str | None = setting_field(
        "AZURE_STORAGE_CONNECTION_STRING",
        "Azure Storage connection string: its BlobEndpoint (else DefaultEndpointsProtocol, AccountName and "
        "EndpointSuffix) says where, its AccountKey or SharedAccessSignature signs; without either, a Microsoft Entra "
        "token (or ANONYMOUS) is used.",
        secret=True,
        secret_parts=secret_parts,
    )
    account: str | None = setting_field(
        "AZURE_STORAGE_ACCOUNT",
        "Azure storage account that az://CONTAINER URIs are in, served at https://ACCOUNT.blob.core.windows.net.",
    )
    account_key: str | None = setting_field(
        "AZURE_STORAGE_KEY",
        "The storage account's access key (SharedKey signing); without a key or SAS token, a Microsoft Entra token "
        "from azure-identity (AKS workload identity, managed identity) is used.",
        secret=True,
    )
    sas_token: str | None = setting_field(
        "AZURE_STORAGE_SAS_TOKEN",
        "A shared access signature (sv=...&sig=...) added to every Azure request; it needs read and list permissions.",
        secret=True,
    )
