"""`cactus download` against a hub that cannot be reached: one clear line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def cactus(*args, **env):
    return subprocess.run([sys.executable, "-m", "cactus_core.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


@pytest.mark.parametrize("env", [
    {"HF_HUB_OFFLINE": "1"},
    {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"},
])
def test_download_offline_is_one_line(tmp_path, env):
    p = cactus("download", "someorg/somemodel", HF_HOME=str(tmp_path), **env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot download someorg/somemodel" in lines[0]


def test_run_with_unknown_repo_id_offline(tmp_path):
    p = cactus("run", "someorg/somemodel", "-p", "hi", HF_HOME=str(tmp_path), HF_HUB_OFFLINE="1")
    assert p.returncode == 1 and "cannot download" in p.stderr and "Traceback" not in p.stderr


def test_not_a_repo_id():
    p = cactus("download", "not a repo")
    assert p.returncode == 1 and "not a Hugging Face repository id" in p.stderr
