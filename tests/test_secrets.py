"""One rule for secrets: every credential a run reads or is handed is hidden the moment it is read or minted, and
any URI shown has its query's credentials masked, in the logs, the termination message and the manifest."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from test_hostile_servers import assert_secret_hidden

from devkit.azurite import EchoingEntra, client_certificate
from devkit.moto import ACCOUNT as MOTO_ACCOUNT
from devkit.moto import Moto
from devkit.programs import ProgramResult, run_program
from devkit.proxy import Proxy
from devkit.relay import EchoFault, Relay
from devkit.seaweed import SeaweedFS
from initializers.common import logs
from initializers.common.uri_credentials import credentials_in, masked
from initializers.sources.aws import access as aws_access
from initializers.sources.azure import entra

SAS_SIG = "AbCdEfGh1234567890xyzSECRETsig/+="
GOOG_SIGNATURE = "0123abcdefDEADBEEF9876fedcba5432"
GOOG_CREDENTIAL = "reader@proj-42.iam.gserviceaccount.com/20250101/auto/storage/goog4_request"


def run(tmp_path: Path, *args: str, **env: str) -> tuple[ProgramResult, str]:
    """A run of the dataset program, and the termination message it left."""
    termination = tmp_path / "termination-log"
    termination.write_text("")
    env = {"OUTPUT_PATH": str(tmp_path / "out"), "INITIALIZERS_TERMINATION_LOG": str(termination), **env}
    result = run_program("dataset", env, *args, timeout=120)
    return result, termination.read_text()


# --- signed URLs: their credentials masked wherever the URI shows ------------------------------------------------

SIGNED = {
    "az-sas": (f"az://ctr/data?sv=2021-08-06&se=2030-01-01&sp=rl&sig={SAS_SIG}", [SAS_SIG]),
    "az-sas-encoded": (f"az://ctr/data?sv=2021-08-06&sig={SAS_SIG.replace('/', '%2F').replace('+', '%2B')}", [SAS_SIG]),
    "gs-signed": (
        f"gs://bkt/data/x.bin?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential={GOOG_CREDENTIAL}"
        f"&X-Goog-Date=20250101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={GOOG_SIGNATURE}",
        [GOOG_SIGNATURE, GOOG_CREDENTIAL],
    ),
    "azure-blob": (f"https://acct.blob.core.windows.net/ctr/d?sig={SAS_SIG}", [SAS_SIG]),
    "s3-presigned": (
        f"s3://bkt/k?X-Amz-Credential=AKIAEXAMPLE%2F20250101&X-Amz-Signature={GOOG_SIGNATURE}",
        [GOOG_SIGNATURE],
    ),
}


@pytest.mark.parametrize("uri,secrets", SIGNED.values(), ids=SIGNED.keys())
def test_a_signed_uri_is_refused_with_its_credentials_masked(tmp_path: Path, uri: str, secrets: list[str]):
    result, termination = run(tmp_path, STORAGE_URI=uri)
    assert result.code == 2, result.stdout + result.stderr
    error = result.last["error"]
    assert error.startswith("STORAGE_URI: ") and "***" in error and "carries credentials in its query" in error
    assert "failed (exit 2): STORAGE_URI" in termination
    for secret in secrets:
        assert_secret_hidden(result, secret, termination)
    assert not (tmp_path / "out").exists()


#: Signed https:// URLs no store claims: the web store's, which takes a presigned URL and hides its whole query.
SIGNED_WEB = {
    "azure-government": (f"https://acct.blob.core.usgovcloudapi.net/ctr/d?sv=2021-08-06&sig={SAS_SIG}", [SAS_SIG]),
    "azure-china": (f"https://acct.blob.core.chinacloudapi.cn/ctr/d?sp=rl&sig={SAS_SIG}", [SAS_SIG]),
    "azure-dfs": (f"https://acct.dfs.core.windows.net/ctr/d?sig={SAS_SIG}&sv=2021-08-06", [SAS_SIG]),
    "storage-googleapis": (f"https://storage.googleapis.com/bkt/o?X-Goog-Signature={GOOG_SIGNATURE}", [GOOG_SIGNATURE]),
}


@pytest.mark.parametrize("uri,secrets", SIGNED_WEB.values(), ids=SIGNED_WEB.keys())
def test_a_signed_web_url_is_the_web_stores_its_query_shown_nowhere(tmp_path: Path, uri: str, secrets: list[str]):
    """Taken by the https:// store (no other claims it); its host unreachable here, the run fails, exit 1, naming the
    URL with `?***` for its query, which no line, termination message or file shows."""
    result, termination = run(tmp_path, STORAGE_URI=uri, TIMEOUT="3")
    assert result.code == 1, result.stdout + result.stderr
    assert uri.partition("?")[0] + "?***" in result.last["error"], result.last
    for secret in [*secrets, uri.partition("?")[2]]:
        assert_secret_hidden(result, secret, termination)
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]  # none: nothing was reached


def test_a_signed_uri_given_as_a_word_is_masked_in_the_refusal(tmp_path: Path):
    uri, secrets = SIGNED["az-sas"]
    result, termination = run(tmp_path, uri)
    assert result.code == 2 and "positional arguments" in result.last["error"] and "sig=***" in result.last["error"]
    for secret in secrets:
        assert_secret_hidden(result, secret, termination)


def test_a_password_in_a_uris_user_information_is_masked(tmp_path: Path):
    result, termination = run(tmp_path, STORAGE_URI="https://user:Pa55w0rdXYZ@acct.blob.core.windows.net/ctr/d")
    assert result.code == 2 and "user:***@" in result.last["error"]
    assert_secret_hidden(result, "Pa55w0rdXYZ", termination)


def test_a_password_in_a_url_a_library_reads_is_hidden(tmp_path: Path):
    """HF_ENDPOINT is huggingface_hub's to read, and messages name it: its password hidden all the same (port 9,
    where nothing listens on loopback: refused)."""
    endpoint = "http://user:Pa55w0rdInUrlQ7@127.0.0.1:9"
    result, termination = run(tmp_path, STORAGE_URI="hf://datasets/org/data", HF_ENDPOINT=endpoint)
    assert result.code == 1 and "user:***@" in result.last["error"], result.last
    assert_secret_hidden(result, "Pa55w0rdInUrlQ7", termination)


@pytest.mark.parametrize(
    "uri,shown",
    [
        ("az://c/d?sv=1&sig=abc%2Bd&se=2", "az://c/d?sv=1&sig=***&se=2"),
        ("https://u:p%40ss@h/x?X-Amz-Security-Token=t&a=b#f", "https://u:***@h/x?X-Amz-Security-Token=***&a=b#f"),
        (
            "gs://b/o?X-Goog-SignedHeaders=host&X-Goog-Signature=s",
            "gs://b/o?X-Goog-SignedHeaders=host&X-Goog-Signature=***",
        ),
        ("s3://b/plain/key", "s3://b/plain/key"),
        ("az://c/name?with=a-question", "az://c/name?with=a-question"),
    ],
)
def test_masked_hides_credential_values_and_keeps_the_rest(uri: str, shown: str):
    assert masked(uri) == shown


def test_credentials_in_gives_each_credential_as_written_and_decoded():
    assert credentials_in("az://c/d?sv=1&sig=abc%2Bd") == ["abc%2Bd", "abc+d"]
    assert credentials_in("https://u:p%40ss@h/x") == ["p%40ss", "p@ss"]
    assert credentials_in("gs://b/o?X-Goog-SignedHeaders=host") == []


# --- a key's JSON where its path belongs -------------------------------------------------------------------------

PRIVATE_KEY = "\n".join(
    [
        "-----BEGIN PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
        "-----END PRIVATE KEY-----",
        "",
    ]
)


@pytest.mark.parametrize("spacing", ["", "\n  "])
def test_a_keys_json_in_google_application_credentials_is_refused_unseen(tmp_path: Path, spacing: str):
    key = {"type": "service_account", "private_key_id": "9f8e7d6c5b4a39281706", "private_key": PRIVATE_KEY,
           "client_email": "reader@proj-42.iam.gserviceaccount.com"}  # fmt: skip
    given = spacing + json.dumps(key, indent=2 if spacing else None)
    result, termination = run(tmp_path, STORAGE_URI="gs://bkt/data", GOOGLE_APPLICATION_CREDENTIALS=given)
    assert result.code == 2, result.stdout + result.stderr
    assert result.last["error"].startswith("GOOGLE_APPLICATION_CREDENTIALS: holds a key's JSON itself (not shown)")
    assert "takes the path of a key file" in result.last["error"] and "failed (exit 2)" in termination
    for secret in (PRIVATE_KEY, given, "9f8e7d6c5b4a39281706", *PRIVATE_KEY.splitlines()[1:3]):
        assert_secret_hidden(result, secret, termination)
    assert "BEGIN PRIVATE KEY" not in result.stdout + result.stderr + termination
    assert not (tmp_path / "out").exists()


# --- a proxy quoting its credentials back ------------------------------------------------------------------------

PROXY_PASSWORD = "Pr0xyPassw0rd9Kq"


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
def test_a_proxy_quoting_proxy_authorization_back_never_makes_the_password_show(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path, variable: str
):
    with Proxy(credentials=("user", PROXY_PASSWORD), echo=True) as proxy:
        url = proxy.url.replace("http://", f"http://user:{PROXY_PASSWORD}@")
        env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", variable: url}
        result, termination = run(tmp_path, **env)
    assert result.code == 1, result.stdout + result.stderr
    assert proxy.log.requests, "the run never went through the proxy"
    assert "you sent" in result.last["error"]  # the proxy's quote reached the message
    basic = base64.b64encode(f"user:{PROXY_PASSWORD}".encode()).decode()
    for secret in (PROXY_PASSWORD, basic, url):
        assert_secret_hidden(result, secret, termination)


# --- azure-identity: what it reads to prove who it is --------------------------------------------------------------

IDENTITY_HEADER = "Id3ntityHeaderXk82Qz"
FEDERATED_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.Fed3ratedSig9Xq"


def test_what_azure_identity_reads_to_prove_who_it_is_is_hidden_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """AKS workload identity's projected token (sent to Entra as the client assertion), App Service's identity
    header, a service principal's secret and its certificate's password: hidden once azure-identity's chain is made,
    before it sends any of them anywhere."""
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(FEDERATED_TOKEN + "\n")
    secrets = {"AZURE_CLIENT_SECRET": "Cl1entSecretQv7", "IDENTITY_HEADER": IDENTITY_HEADER,
               "AZURE_CLIENT_CERTIFICATE_PASSWORD": "C3rtPasswordWx4"}  # fmt: skip
    for name, value in {**secrets, "AZURE_FEDERATED_TOKEN_FILE": str(token_file)}.items():
        monkeypatch.setenv(name, value)
    entra._default_credential()
    for secret in [*secrets.values(), FEDERATED_TOKEN]:
        assert logs.redact(f"echoed {secret} back") == "echoed *** back", secret


# --- a session STS mints for ROLE_ARN ----------------------------------------------------------------------------


def _s3_error(text: str) -> bytes:
    said = escape(text)
    return f"<?xml version='1.0'?><Error><Code>{said}</Code><Message>{said}</Message></Error>".encode()


def test_a_server_quoting_the_session_token_sts_minted_back_never_makes_it_show(moto: Moto, tmp_path: Path):
    """The session token of an assumed role travels in every request (x-amz-security-token): a server quoting it
    back prints it no more than the secret key minted with it."""
    s3 = moto.client("s3", "admin")
    s3.create_bucket(Bucket="moto-echo")
    s3.put_object(Bucket="moto-echo", Key="d/a.txt", Body=b"a")
    role = f"arn:aws:iam::{MOTO_ACCOUNT}:role/s3-reader"
    with Relay(moto.endpoint) as relay:
        fault = relay.add_fault(EchoFault(status=403, match="/moto-echo", times=None, render=_s3_error))
        env = {**moto.env("reader"), "ENDPOINT": relay.endpoint, "ROLE_ARN": role, "STORAGE_URI": "s3://moto-echo/d"}
        result, termination = run(tmp_path, **env)
    assert result.code == 1, result.stdout + result.stderr
    assert "you sent" in result.last["error"], result.last["error"]  # the quote reached the message
    tokens = {
        headers.get("x-amz-security-token") or headers.get("X-Amz-Security-Token") for *_, headers, _ in fault.echoed
    }
    assert tokens and None not in tokens
    for token in tokens:
        assert_secret_hidden(result, token, termination)


def test_the_web_identity_token_botocore_sends_sts_is_hidden_as_the_chain_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """EKS's projected token (IRSA), which botocore sends STS to get the role's session."""
    import botocore.session

    token_file = tmp_path / "eks-token"
    token_file.write_text(FEDERATED_TOKEN + "\n")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    session = botocore.session.get_session()
    session.set_credentials("AKIAEXAMPLE", "not-read-here")
    aws_access.resolve_credentials(session, None)
    assert logs.redact(f"echoed {FEDERATED_TOKEN}") == "echoed ***"


@pytest.mark.parametrize("proof", ["certificate", "secret"])
def test_what_azure_identity_sends_a_token_endpoint_quoting_it_back_never_shows(tmp_path: Path, proof: str):
    """A service principal's client assertion (the JWT azure-identity signs with AZURE_CLIENT_CERTIFICATE_PATH's key,
    minted at each request, read from no variable) or its AZURE_CLIENT_SECRET, sent to an Entra token endpoint that
    quotes the request's body back in its refusal: no form of it in the output, the termination message or the
    output folder."""
    if proof == "certificate":
        client_certificate(tmp_path / "principal.pem")
        credential = {"AZURE_CLIENT_CERTIFICATE_PATH": str(tmp_path / "principal.pem")}
    else:
        credential = {"AZURE_CLIENT_SECRET": "Cl1entSecret-Qv7~Zt9.Wx_4Lm2Pq"}
    with EchoingEntra(tmp_path) as entra:
        env = {**entra.env(), **credential, "AZURE_STORAGE_ACCOUNT": "acct", "STORAGE_URI": "az://ctr/d",
               "LOG_LEVEL": "debug"}  # fmt: skip
        result, termination = run(tmp_path, **env)
    assert result.code == 1, result.stdout + result.stderr
    assert "you sent" in result.last["error"], result.last["error"]  # the endpoint's quote reached the message
    field = "client_assertion" if proof == "certificate" else "client_secret"
    sent = [value for body in entra.sent for value in urllib.parse.parse_qs(body).get(field, [])]
    assert sent, entra.sent
    kept = "".join(path.read_text(errors="replace") for path in (tmp_path / "out").rglob("*") if path.is_file())
    for secret in sent:
        assert_secret_hidden(result, secret, termination, kept)
        for piece in {secret[i : i + 12] for i in range(len(secret) - 11)}:
            assert piece not in result.stdout + result.stderr + termination + kept, piece
