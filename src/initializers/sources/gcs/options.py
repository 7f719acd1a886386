"""How to reach Cloud Storage: another endpoint or an emulator; credentials by google-auth's `GOOGLE_AUTH_VARIABLES`."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.config.settings import setting_field

#: google-auth's own: a service-account key or a workload-identity-federation file (`also_reads`).
GOOGLE_AUTH_VARIABLES = ("GOOGLE_APPLICATION_CREDENTIALS",)


@dataclass(frozen=True)
class GcsOptions:
    gcs_endpoint: str | None = setting_field(
        "GCS_ENDPOINT",
        "Cloud Storage's address, when not https://storage.googleapis.com (a Private Service Connect endpoint, a "
        "proxy): the credentials' tokens are sent there.",
    )
    emulator_host: str | None = setting_field(
        "STORAGE_EMULATOR_HOST",
        "A Cloud Storage emulator (http://host:port, or host:port), as Google's client libraries read it: requests go "
        "there, with no credentials.",
    )
