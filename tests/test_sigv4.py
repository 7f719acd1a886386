"""Our SigV4 headers equal botocore's for the same request (botocore is the reference implementation)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from initializers.sources.s3_get import ObjectEndpoint
from initializers.sources.sigv4 import GetSigner, SigningCredentials


@pytest.mark.parametrize("token", [None, "session-token-value"])
@pytest.mark.parametrize("key", ["plain.bin", "dir/ünïcode name+1=2.txt", "a~b/c(d)"])
def test_signature_matches_botocore(key: str, token: str | None, monkeypatch: pytest.MonkeyPatch):
    when = datetime(2026, 11, 29, 12, 30, 45, tzinfo=UTC)
    endpoint = ObjectEndpoint("http", "127.0.0.1:8333", "/bucket/")
    path = endpoint.path(key)
    extra = {"range": "bytes=0-99", "if-match": '"abc"'}
    ours = GetSigner("eu-west-1").headers(
        SigningCredentials("AKID", "SECRET", token), "127.0.0.1:8333", path, extra, when
    )

    # botocore sends UNSIGNED-PAYLOAD only over https with payload signing off; the scheme itself is not signed.
    headers = {"Range": "bytes=0-99", "If-Match": '"abc"'}
    request = AWSRequest(method="GET", url=f"https://127.0.0.1:8333{path}", headers=headers)
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: when.replace(tzinfo=None))  # a fixed clock
    auth = S3SigV4Auth(Credentials("AKID", "SECRET", token), "s3", "eu-west-1")
    auth.add_auth(request)
    assert ours["authorization"] == request.headers["Authorization"]


def test_credentials_repr_hides_the_secret():
    assert "SECRET" not in repr(SigningCredentials("AKID", "SECRET"))


def test_object_endpoint_from_virtual_and_path_style_urls():
    virtual = ObjectEndpoint.from_object_url("https://bkt.s3.eu-west-1.amazonaws.com/initializers-probe?X=1")
    assert (virtual.netloc, virtual.path("a b/c")) == ("bkt.s3.eu-west-1.amazonaws.com", "/a%20b/c")
    path_style = ObjectEndpoint.from_object_url("http://127.0.0.1:9000/bkt/initializers-probe")
    assert path_style.path("x/y") == "/bkt/x/y"
