"""Each protocol's one rule for what is worth another attempt (S3, the Hub, the cache's reads through pyarrow), and
certificate failures found behind the exceptions client libraries wrap them in."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import httpx2
import pytest

from devkit.hubserver import HubServer
from devkit.relay import Relay, self_signed_certificate
from initializers.common.errors import FetchError
from initializers.sources.aws.bucket import S3_TRUST, s3_transient
from initializers.sources.hub.get import HUB_TRUST, hub_transient
from initializers.sources.iceberg.errors import pyarrow_transient
from initializers.store.retry import retrying, untrusted_certificate


@pytest.mark.parametrize(
    ("status", "code", "throttled"),
    [
        (503, "SlowDown", True),
        (500, "InternalError", False),
        (400, "RequestTimeout", False),
        (429, "x", True),
        (502, "BadGateway", False),
    ],
)
def test_s3_answers_worth_another_attempt(status: int, code: str, throttled: bool):
    transient = s3_transient(status, code, "3")
    assert transient is not None and transient.throttled is throttled
    assert transient.retry_after == 3.0 and str(transient) == f"{status} {code}"


@pytest.mark.parametrize(
    ("status", "code"), [(403, "AccessDenied"), (404, "NoSuchKey"), (412, "PreconditionFailed"), (501, "NotImpl")]
)
def test_s3_answers_no_retry_changes(status: int, code: str):
    assert s3_transient(status, code, None) is None


@pytest.mark.parametrize(("status", "throttled"), [(500, False), (502, False), (503, True), (507, False), (429, True)])
def test_hub_answers_worth_another_attempt_for_its_api_and_its_downloads(status: int, throttled: bool):
    transient = hub_transient(status, "from the Hub", None)
    assert transient is not None and transient.throttled is throttled and transient.retry_after is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 416])
def test_hub_answers_no_retry_changes(status: int):
    assert hub_transient(status, "nope", "5") is None


def test_pyarrow_s3_errors_by_the_aws_error_type_they_name():
    slow = OSError(
        "When reading information for key 'a/b' in bucket 'w': AWS Error SLOW_DOWN during GetObject "
        "operation: Please reduce your request rate."
    )
    down = OSError("AWS Error SERVICE_UNAVAILABLE during HeadObject operation: unavailable")
    denied = OSError("AWS Error ACCESS_DENIED during GetObject operation: Access Denied")
    digits = OSError("When reading 's3://w/INTERNAL_FAILURE-503.parquet': no such key")  # a name, not a type
    assert (t := pyarrow_transient(slow, "slow")) is not None and t.throttled and str(t) == "slow"
    assert (t := pyarrow_transient(down, "down")) is not None and not t.throttled
    assert pyarrow_transient(denied, "denied") is None
    assert pyarrow_transient(digits, "digits") is None


@pytest.mark.parametrize(("status", "transient", "throttled"), [(500, True, False), (503, True, True),
                         (429, True, True), (404, False, False), (403, False, False)])  # fmt: skip
def test_an_answer_without_a_body_is_judged_by_its_status(status: int, transient: bool, throttled: bool):
    """S3 answers a HEAD without a body, so pyarrow names no type: `UNKNOWN (HTTP status N)`; the status decides."""
    headless = OSError(
        f"When reading information for key 'a/b' in bucket 'w': AWS Error UNKNOWN (HTTP status {status}) during "
        "HeadObject operation: No response body."
    )
    found = pyarrow_transient(headless, "headless")
    assert (found is not None) is transient
    assert found is None or found.throttled is throttled


def test_a_certificate_failure_is_found_behind_httpx_and_named_per_source(tmp_path: Path):
    """A real handshake with a self-signed server: the SSL error itself, and httpx's wrapper around it."""
    cert, key = self_signed_certificate(tmp_path)
    with HubServer() as hub, Relay(hub.endpoint, tls=(cert, key)) as relay:
        host, port = relay.endpoint.removeprefix("https://").split(":")
        with socket.create_connection((host, int(port))) as raw, pytest.raises(ssl.SSLCertVerificationError) as direct:
            ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        with pytest.raises(httpx2.ConnectError) as wrapped:
            httpx2.get(f"{relay.endpoint}/api/models")
    assert untrusted_certificate(direct.value) is direct.value
    found = untrusted_certificate(wrapped.value)
    assert isinstance(found, ssl.SSLCertVerificationError) and found.verify_message
    assert untrusted_certificate(ConnectionRefusedError(111, "refused")) is None

    def refused(verb: str, where: str, trust: str) -> str:
        """What the retry policy, the one owner of the certificate hint, says at the first attempt: no retry."""
        attempts = []

        def attempt() -> None:
            attempts.append(1)
            raise wrapped.value

        with pytest.raises(FetchError) as failed:
            retrying(verb, where, attempt, trust=trust)
        assert len(attempts) == 1
        return str(failed.value)

    hub_message = refused("list", "hf://o/n", HUB_TRUST)
    s3_message = refused("open", "s3://b/k", S3_TRUST)
    assert hub_message.startswith("cannot list hf://o/n: the server's TLS certificate does not verify (")
    assert hub_message.endswith("for a private CA set SSL_CERT_FILE (or SSL_CERT_DIR) to its certificate file")
    assert s3_message.endswith("for a private CA set AWS_CA_BUNDLE (or a profile's ca_bundle) to its certificate file")
