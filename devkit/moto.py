"""A third S3 server on loopback, with IAM and STS: moto's server (moto[server], in its own venv), auth enforced.

moto verifies SigV4 by re-signing each request with botocore, so it refuses a signature over headers AWS SDKs
never sign; with IAM enforced it checks every request against the users', roles' and policies' permissions,
and issues sessions for AssumeRole: the place to test ROLE_ARN end to end. Its data lives in memory.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.ports import free_port
from devkit.processes import stop_process_group, wait_until_serving

MOTO_VENV = Path(__file__).resolve().parents[1] / ".venvs" / "moto"
ACCOUNT = "123456789012"  # moto's account
REGION = "us-east-1"


@dataclass
class Moto:
    endpoint: str
    process: subprocess.Popen[bytes]
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # IAM user -> (access key, secret)

    @classmethod
    def start(cls, timeout: float = 60.0) -> Moto:
        binary = MOTO_VENV / "bin" / "moto_server"
        if not binary.exists():
            raise RuntimeError(f"{binary} is missing: run `make install`")
        port = free_port()
        log_path = Path(tempfile.mkstemp(prefix="moto-", suffix=".log")[1])
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        server = cls(f"http://127.0.0.1:{port}", process)
        wait_until_serving(process, f"{server.endpoint}/moto-api/", log_path, "moto", timeout)
        return server

    def client(self, service: str, user: str | None = None) -> Any:
        """A boto3 client; as an IAM user once auth is enforced, as anyone before."""
        import boto3

        access_key, secret = self.keys[user] if user else ("setup", "setup")
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=access_key,
                            aws_secret_access_key=secret)  # fmt: skip

    def add_user(self, name: str, policy: dict[str, Any]) -> str:
        """An IAM user with an inline policy and an access key; returns its ARN."""
        iam = self.client("iam")
        arn = iam.create_user(UserName=name)["User"]["Arn"]
        iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        self.keys[name] = (key["AccessKeyId"], key["SecretAccessKey"])
        return arn

    def add_role(self, name: str, trusted_user_arn: str, policy: dict[str, Any]) -> str:
        """A role the given user may assume (moto answers 500 to a trust in a Service principal); returns its ARN."""
        iam = self.client("iam")
        trust = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": trusted_user_arn}, "Action": "sts:AssumeRole"}]}  # fmt: skip
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        iam.put_role_policy(RoleName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
        return arn

    def enforce_auth(self) -> None:
        """From now on every request needs valid credentials with permission for it."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
        )  # a form content type would hide the body from moto
        urllib.request.urlopen(request, timeout=10).close()

    def env(self, user: str) -> dict[str, str]:
        """The initializer's variables for this server, as an IAM user."""
        access_key, secret = self.keys[user]
        return {"ENDPOINT": self.endpoint, "ACCESS_KEY_ID": access_key, "SECRET_ACCESS_KEY": secret, "REGION": REGION}

    def stop(self) -> None:
        stop_process_group(self.process)

    def __enter__(self) -> Moto:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def allow(*actions: str) -> dict[str, Any]:
    """An IAM policy allowing these actions on every resource."""
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]}
