"""The az:// store's conformance fixtures: a container on Azurite, behind a relay, its blobs put whole
(`AzureStore`) or committed from blocks (`AzureBlocksStore`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from devkit.azurite import ACCOUNT as AZURE_ACCOUNT
from devkit.azurite import Azurite, account_sas, connection_string
from devkit.conformance import Store, xml_error
from devkit.malformed import HUGE, ONE, OUTSIDE, MalformedAnswer, case_maker
from devkit.relay import EchoFault, Relay, StatusFault
from initializers.sources.azure.source import AzureSource


class AzureStore(Store):
    """A container on Azurite (SharedKey enforced); a relay in front of it, which the connection string's BlobEndpoint
    names. Blobs are put in one request each, so Azure records their Content-MD5."""

    scheme = "az"
    source = AzureSource
    folder_names = True
    prefix = "root"

    @classmethod
    def serve(cls, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Store]:
        azurite = request.getfixturevalue("azurite")
        with Relay(azurite.endpoint) as relay:
            yield cls(azurite, f"conformance-{tmp.name}", relay)

    def __init__(self, azurite: Azurite, container: str, relay: Relay) -> None:
        self.azurite, self.container, self.relay = azurite, container, relay
        azurite.create_container(container)

    def change(self, path: str, data: bytes) -> None:
        self.azurite.put_blob(self.container, f"{self.prefix}/{path}", data)

    def env(self, output: Path) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{self.relay.endpoint}/{AZURE_ACCOUNT}"),
                "STORAGE_URI": f"az://{self.container}/{self.prefix}", "OUTPUT_PATH": str(output)}  # fmt: skip

    def relay_for(self, path: str) -> tuple[Relay, str]:
        return self.relay, f"/{AZURE_ACCOUNT}/{self.container}/{quote(f'{self.prefix}/{path}', safe='/~')}"

    def listing(self) -> tuple[Relay, str]:
        return self.relay, "comp=list"

    @property
    def relays(self) -> list[Relay]:
        return [self.relay]

    def error_fault(self, match: str, times: int = 1, method: str | None = None) -> StatusFault:
        """Azure's 500 InternalError."""
        return _azure_fault(500, "InternalError", match, times, method)

    def throttle_fault(self, match: str, times: int = 3, method: str | None = None) -> StatusFault:
        """Azure's throttling: 503 ServerBusy, asking to come back in 0.3 s."""
        return _azure_fault(503, "ServerBusy", match, times, method, {"Retry-After": "0.3"})

    def echo_fault(self, status: int, match: str | None) -> EchoFault:
        """Azure's XML error, its code in x-ms-error-code."""
        return EchoFault(status=status, match=match, times=None, render=xml_error, echo_header="x-ms-error-code")

    def credentialed_env(self, output: Path, keys: Path) -> tuple[dict[str, str], list[str]]:
        """A SAS in the query of every request."""
        sas = account_sas()
        return {**self.env(output), "AZURE_STORAGE_CONNECTION_STRING": connection_string(
            f"{self.relay.endpoint}/{AZURE_ACCOUNT}", key=None), "AZURE_STORAGE_SAS_TOKEN": sas}, [
            unquote(sas.rpartition("sig=")[2])]  # fmt: skip

    def malformed_answers(self) -> dict[str, MalformedAnswer]:
        """The cases its List Blobs answers (XML) can carry."""

        def page(blobs: str) -> bytes:
            return (
                f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>{blobs}</Blobs><NextMarker/>'
                "</EnumerationResults>"
            ).encode()

        def blob(name: str, size: object) -> str:
            return (
                f"<Blob><Name>{name}</Name><Properties><Content-Length>{size}</Content-Length><Etag>&quot;e&quot;</Etag>"
                "</Properties></Blob>"
            )

        case = case_maker(self, bytes, "application/xml")

        prefix = f"{self.prefix}/"
        return {
            "shape": case(b"<Error><Code>InternalError</Code></Error>", "not an <EnumerationResults>"),
            "entry": case(page("<Blob>x</Blob>"), "has no Name or no Properties"),
            "no-name": case(page(blob("", 1)), "has no Name or no Properties"),
            "huge-size": case(page(blob(f"{prefix}a", HUGE)), f"is {HUGE} bytes, outside 0 to 2^63 - 1"),
            "negative-size": case(page(blob(f"{prefix}a", -1)), "not a byte count: '-1'"),
            "outside-prefix": case(page(blob(OUTSIDE, 1)), f"it lists {OUTSIDE!r}, which is not under the prefix"),
            "head": case(
                page(blob(f"{prefix}{ONE}", HUGE)),
                f"is {HUGE} bytes",
                match="maxresults=1&",
                uri=f"az://{self.container}/{prefix}{ONE}",
            ),
        }


class AzureBlocksStore(AzureStore):
    """The same, its blobs staged in blocks and committed from their list, as large uploads are: Azure records no
    Content-MD5 for them, so each answer is checked against the MD5 Azure sends of it instead."""

    def change(self, path: str, data: bytes) -> None:
        blocks = [data[start : start + _BLOCK] for start in range(0, len(data), _BLOCK)] or [b""]
        self.azurite.put_blocks(self.container, f"{self.prefix}/{path}", blocks)

    @property
    def verifies_content(self) -> bool:
        """No: their manifest entries record their size and ETag (their bytes were checked on the way only)."""
        return False


#: The size of the blocks `AzureBlocksStore` stages a blob in.
_BLOCK = 3 << 20


def _azure_fault(
    status: int, code: str, match: str, times: int, method: str | None, headers: dict[str, str] | None = None
) -> StatusFault:
    """Azure's error answer: its code in x-ms-error-code and in the XML body."""
    body = (
        f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>conformance fault</Message></Error>'
    )
    return StatusFault(status=status, times=times, match=match, method=method, body=body.encode(),
                       headers={"x-ms-error-code": code, **(headers or {})})  # fmt: skip


FIXTURES = {AzureStore.scheme: AzureStore, "az-blocks": AzureBlocksStore}
