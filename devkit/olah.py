"""olah, a third-party HuggingFace Hub mirror (its own venv), serving git repos we build, fully offline.

An independent peer for the happy path: if our Hub source works against both olah and our own server,
it speaks the protocol rather than our server's dialect. olah serves committed content of non-bare git
repos under `mirrors/{models|datasets}/{org}/{name}`; LFS files are committed as pointer files with the
object under `.git/lfs/objects/` (git-lfs itself is not needed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from devkit.ports import free_port
from devkit.processes import stop_process_group, wait_until_serving

OLAH_CLI = Path(__file__).resolve().parents[1] / ".venvs" / "olah" / "bin" / "olah-cli"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "initializers tests",
    "GIT_AUTHOR_EMAIL": "tests@localhost",
    "GIT_COMMITTER_NAME": "initializers tests",
    "GIT_COMMITTER_EMAIL": "tests@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


class Olah:
    def __init__(self) -> None:
        if not OLAH_CLI.exists():
            raise RuntimeError(f"{OLAH_CLI} is missing: run `make install`")
        self.root = Path(tempfile.mkdtemp(prefix="olah-"))
        self.mirrors = self.root / "mirrors"
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes],
        repo_type: str = "model",
        is_lfs: Callable[[str, int], bool] | None = None,
    ) -> Path:
        """Create a git repo with one commit on `main` holding `files`; returns its folder for more commits."""
        folder = self.mirrors / f"{repo_type}s" / repo_id
        folder.mkdir(parents=True)
        self._git(folder, "init", "-q", "-b", "main")
        self.commit(folder, files, "initial", is_lfs)
        return folder

    def commit(
        self, folder: Path, files: dict[str, bytes], message: str, is_lfs: Callable[[str, int], bool] | None = None
    ) -> str:
        for path, body in files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if is_lfs is not None and is_lfs(path, len(body)):
                oid = hashlib.sha256(body).hexdigest()
                objects = folder / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4]
                objects.mkdir(parents=True, exist_ok=True)
                (objects / oid).write_bytes(body)
                target.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(body)}\n")
            else:
                target.write_bytes(body)
        self._git(folder, "add", "-A")
        self._git(folder, "commit", "-q", "-m", message)
        return self._git(folder, "rev-parse", "HEAD").strip()

    def tag(self, folder: Path, name: str) -> None:
        self._git(folder, "tag", name)

    def _git(self, folder: Path, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=folder, env={**os.environ, **_GIT_ENV}, capture_output=True, text=True, check=True
        )
        return done.stdout

    def start(self, probe_repo: str, timeout: float = 60.0) -> None:
        """Start olah; `probe_repo` ("models/org/name") is used to tell when it answers."""
        config = self.root / "olah.toml"
        config.write_text(
            "[basic]\n"
            f'host = "127.0.0.1"\nport = {self.port}\n'
            f'mirrors-path = ["{self.mirrors}"]\nrepos-path = "{self.root / "cache"}"\n'
            f'mirror-scheme = "http"\nmirror-netloc = "127.0.0.1:{self.port}"\n'
            f'mirror-lfs-netloc = "127.0.0.1:{self.port}"\n'
            'hf-scheme = "http"\nhf-netloc = "127.0.0.1:9"\nhf-lfs-netloc = "127.0.0.1:9"\n'
            "[accessibility]\noffline = true\n"
        )
        (self.root / "logs").mkdir()
        with open(self.root / "olah.log", "wb") as log:
            self._process = subprocess.Popen(
                [str(OLAH_CLI), "-c", str(config), "--log-path", str(self.root / "logs")],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.root,
            )
        kind, _, repo = probe_repo.partition("/")
        url = f"{self.endpoint}/api/{kind}/{repo}/revision/main"
        wait_until_serving(self._process, url, self.root / "olah.log", "olah", timeout)

    def stop(self) -> None:
        if self._process is not None:
            stop_process_group(self._process)
        shutil.rmtree(self.root, ignore_errors=True)
