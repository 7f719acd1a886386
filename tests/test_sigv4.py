"""Our SigV4 headers and S3 addressing equal botocore's for the same request (botocore is the reference)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from initializers.sources.aws.bucket import PROBE_KEY, ObjectEndpoint
from initializers.sources.aws.sigv4 import GetSigner, SigningCredentials, canonical_query

WHEN = datetime(2026, 11, 29, 12, 30, 45, tzinfo=UTC)


def botocore_authorization(
    url: str, headers: dict[str, str], token: str | None, monkeypatch: pytest.MonkeyPatch, when: datetime = WHEN
) -> str:
    # botocore sends UNSIGNED-PAYLOAD only over https with payload signing off; the scheme itself is not signed.
    request = AWSRequest(method="GET", url=url, headers=headers)
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: when.replace(tzinfo=None))  # a fixed clock
    S3SigV4Auth(Credentials("AKID", "SECRET", token), "s3", "eu-west-1").add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize("token", [None, "session-token-value"])
@pytest.mark.parametrize("key", ["plain.bin", "dir/ünïcode name+1=2.txt", "a~b/c(d)"])
def test_signature_matches_botocore(key: str, token: str | None, monkeypatch: pytest.MonkeyPatch):
    endpoint = ObjectEndpoint("http", "127.0.0.1:8333", "/bucket/")
    path = endpoint.path(key)
    extra = {"range": "bytes=0-99", "if-match": '"abc"', "user-agent": "initializers/1"}
    ours = GetSigner("eu-west-1").headers(
        SigningCredentials("AKID", "SECRET", token), "127.0.0.1:8333", path, extra, WHEN
    )
    headers = {"Range": "bytes=0-99", "If-Match": '"abc"', "User-Agent": "initializers/1"}
    assert ours["authorization"] == botocore_authorization(f"https://127.0.0.1:8333{path}", headers, token, monkeypatch)
    # As AWS SDKs do: the user agent is sent, never signed (a proxy may rewrite it; moto re-signs without it).
    assert ours["user-agent"] == "initializers/1" and "user-agent" not in ours["authorization"]


@pytest.mark.parametrize("token", [None, "session-token-value"])
@pytest.mark.parametrize("prefix", ["", "data/", "dir/ünïcode name+1=2&x/"])
def test_listing_signature_matches_botocore(prefix: str, token: str | None, monkeypatch: pytest.MonkeyPatch):
    query = canonical_query({"list-type": "2", "prefix": prefix, "continuation-token": "a/b+c==", "max-keys": "1000"})
    ours = GetSigner("eu-west-1").headers(
        SigningCredentials("AKID", "SECRET", token), "127.0.0.1:8333", "/bucket/", {}, WHEN, query
    )
    url = f"https://127.0.0.1:8333/bucket/?{query}"
    assert ours["authorization"] == botocore_authorization(url, {}, token, monkeypatch)


def test_one_signer_stamps_each_request_with_its_own_second(monkeypatch: pytest.MonkeyPatch):
    """The signer keeps a second's x-amz-date for the requests within it: a request in the next second, or back in
    an earlier one, is stamped and signed as botocore signs it then."""
    signer = GetSigner("eu-west-1")
    credentials = SigningCredentials("AKID", "SECRET")
    later = WHEN.replace(microsecond=999_999)
    for when in (WHEN, later, later + timedelta(microseconds=1), WHEN):
        headers = signer.headers(credentials, "127.0.0.1:8333", "/bucket/a", {}, when)
        assert headers["x-amz-date"] == when.strftime("%Y%m%dT%H%M%SZ")
        url = "https://127.0.0.1:8333/bucket/a"
        assert headers["authorization"] == botocore_authorization(url, {}, None, monkeypatch, when)


def test_credentials_repr_hides_the_secret():
    assert "SECRET" not in repr(SigningCredentials("AKID", "SECRET"))


def test_object_endpoint_from_virtual_and_path_style_urls():
    virtual = ObjectEndpoint.from_object_url("https://bkt.s3.eu-west-1.amazonaws.com/initializers-probe?X=1")
    assert (virtual.netloc, virtual.path("a b/c")) == ("bkt.s3.eu-west-1.amazonaws.com", "/a%20b/c")
    path_style = ObjectEndpoint.from_object_url("http://127.0.0.1:9000/bkt/initializers-probe")
    assert path_style.path("x/y") == "/bkt/x/y"


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9000", "http://127.0.0.1:9000/", "https://minio.local/s3/"])
def test_path_style_endpoint_equals_botocores(endpoint: str):
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKID",
        aws_secret_access_key="SECRET", config=Config(s3={"addressing_style": "path"}),
    )  # fmt: skip
    url = client.generate_presigned_url("get_object", Params={"Bucket": "my.bkt", "Key": PROBE_KEY})
    assert ObjectEndpoint.path_style(endpoint, "my.bkt") == ObjectEndpoint.from_object_url(url)
