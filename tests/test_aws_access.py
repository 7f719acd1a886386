"""`AwsAccess`, the one decision of how a run reaches S3: keys, the chain or a role; the region; the CA bundle; and
errors that name the variable the user set (ROLE_ARN, or the cache's IAM_ROLE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.moto import ACCOUNT, Moto
from initializers.common.errors import ConfigError, FetchError
from initializers.config.contract import Config
from initializers.sources import MODEL
from initializers.sources.aws.access import NO_CREDENTIALS, Role, aws_access, endpoint_setting
from initializers.sources.aws.options import AwsOptions
from initializers.sources.aws.sigv4 import SigningCredentials


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing from the machine: no AWS_* keys or region, no config or credentials file, no instance metadata."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                     "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CA_BUNDLE", "AWS_ROLE_ARN",
                     "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                     "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):  # fmt: skip
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_keys_and_an_endpoint_leave_botocore_nothing_to_resolve():
    options = AwsOptions(endpoint="http://127.0.0.1:1", access_key_id="AKID", secret_access_key="secret")
    access = aws_access(options, None, False)
    assert access.session is None and access.region == "us-east-1" and access.ca_bundle is None
    assert access.static == SigningCredentials("AKID", "secret")
    assert access.credentials()() == SigningCredentials("AKID", "secret")


def test_anonymous_signs_nothing():
    access = aws_access(AwsOptions(endpoint="http://127.0.0.1:1"), None, True)
    assert access.session is None and access.credentials()() is None


def test_without_keys_the_chain_resolves_them(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "FROM-CHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    access = aws_access(AwsOptions(endpoint="http://127.0.0.1:1"), None, False)
    assert access.session is not None and access.static is None and access.region == "eu-west-3"
    assert access.credentials()() == SigningCredentials("FROM-CHAIN", "chain-secret")


def test_region_comes_from_region_then_the_aws_variables_then_a_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    keys = {"endpoint": "http://127.0.0.1:1", "access_key_id": "AKID", "secret_access_key": "secret"}
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert aws_access(AwsOptions(**keys, region="ca-central-1"), None, False).region == "ca-central-1"
    assert aws_access(AwsOptions(**keys), None, False).region == "ap-south-1"
    monkeypatch.delenv("AWS_REGION")
    (tmp_path / "config").write_text("[default]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert aws_access(AwsOptions(**keys), None, False).region == "sa-east-1"  # a config file: botocore reads it


def test_no_credentials_anywhere_is_a_configuration_error():
    access = aws_access(AwsOptions(endpoint="http://127.0.0.1:1"), None, False)
    with pytest.raises(ConfigError) as raised:
        access.credentials()
    assert str(raised.value) == NO_CREDENTIALS


def test_a_missing_ca_bundle_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "nope.pem"))
    with pytest.raises(ConfigError, match=r"AWS_CA_BUNDLE \(or the profile's ca_bundle\): no such file"):
        aws_access(AwsOptions(access_key_id="AKID", secret_access_key="secret"), None, False)


@pytest.mark.parametrize("variable", ["ROLE_ARN", "IAM_ROLE"])
def test_anonymous_with_a_role_names_the_variable_that_named_the_role(variable: str):
    role = Role(f"arn:aws:iam::{ACCOUNT}:role/r", variable)
    with pytest.raises(ConfigError) as raised:
        aws_access(AwsOptions(), role, True)
    assert f"ANONYMOUS=true conflicts with ACCESS_KEY_ID/{variable}" in str(raised.value)


def test_half_a_key_pair_is_refused():
    with pytest.raises(ConfigError, match="SECRET_ACCESS_KEY is not set: ACCESS_KEY_ID and SECRET_ACCESS_KEY go"):
        aws_access(AwsOptions(access_key_id="AKID"), None, False)


def test_a_role_is_not_given_by_an_empty_value():
    assert Role.given(None, "IAM_ROLE") is None and Role.given("", "ROLE_ARN") is None
    assert Role.given("arn:x", "IAM_ROLE") == Role("arn:x", "IAM_ROLE")


@pytest.mark.parametrize("variable", ["ROLE_ARN", "IAM_ROLE"])
def test_sts_refusing_the_role_names_the_variable_that_named_it(moto: Moto, variable: str):
    """moto's STS refuses `reader` the role `admin-only`: the message says which variable to check."""
    config = Config.from_env(moto.env("reader"), kind=MODEL)
    access = aws_access(config.options(AwsOptions), Role(f"arn:aws:iam::{ACCOUNT}:role/admin-only", variable), False)
    with pytest.raises(FetchError) as raised:
        access.credentials()()
    assert f"S3 credentials for {variable} failed" in str(raised.value)
    assert f"check {variable} and the role's trust policy (AccessDenied" in str(raised.value)
    other = {"ROLE_ARN": "IAM_ROLE", "IAM_ROLE": "ROLE_ARN"}[variable]
    assert other not in str(raised.value)


def test_an_unset_endpoint_falls_back_to_botocores_endpoint_variables_in_its_order(monkeypatch: pytest.MonkeyPatch):
    """AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, as botocore reads them for S3: honoured as ENDPOINT is, so the S3
    and cache sources (pyarrow's reads included) address the same endpoint path-style."""
    assert endpoint_setting(AwsOptions()) is None
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://every-service:9000\n")  # a Secret's trailing newline, dropped
    assert endpoint_setting(AwsOptions()) == "http://every-service:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3-only:9000")
    assert endpoint_setting(AwsOptions()) == "http://s3-only:9000"
    assert endpoint_setting(AwsOptions(endpoint="http://ours:9000")) == "http://ours:9000"
    assert aws_access(AwsOptions(), None, True).endpoint == "http://s3-only:9000"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "True")  # botocore then ignores both
    assert endpoint_setting(AwsOptions()) is None


def test_a_bad_endpoint_variable_is_named(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ConfigError, match=r"^ENDPOINT: expected an http:// or https:// URL, got 'minio:9000'"):
        endpoint_setting(AwsOptions(endpoint="minio:9000"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "minio:9000")
    with pytest.raises(ConfigError, match=r"^AWS_ENDPOINT_URL_S3: expected an http:// or https:// URL, got 'minio:"):
        endpoint_setting(AwsOptions())
