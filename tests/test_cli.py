"""The `cactus` command as a user runs it: a real subprocess, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tinymodel import make_chat_model


def cactus(*args, stdin=None, env=None):
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "cactus_core.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=300, env=e)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("cli") / "tiny")


def test_run_prompt_json_prints_full_response(model_dir):
    p = cactus("run", model_dir, "--prompt", "hi", "--json", "--max-tokens", "5")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["success"] and r["model"] == "tiny" and r["backend"] == "numpy_ref"
    for key in ("confidence", "cloud_handoff", "time_to_first_token_ms", "decode_tps", "ram_usage_mb"):
        assert key in r


def test_plugins_json_lists_numpy_ref():
    p = cactus("plugins", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert "numpy_ref" in [b["name"] for b in info["backends"]]
    assert info["device"]["arch"] and "cactus_core" in info["plugins"]


def test_plugins_text():
    p = cactus("plugins")
    assert p.returncode == 0 and "numpy_ref" in p.stdout and "device:" in p.stdout


def test_repl_reads_turns_from_stdin(model_dir):
    p = cactus("run", model_dir, "--json", "--max-tokens", "3", stdin="hello\n/reset\nagain\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count('"success": true') == 2


@pytest.mark.parametrize("args,needle", [
    (["run", "/no/such/model", "-p", "hi"], "not found"),
    (["run", "__MODEL__", "-p", "hi", "--backend", "metal"], "unknown backend 'metal'"),
    (["run", "__MODEL__", "-p", "x " * 3000, "--context", "64"], "context"),
    (["run", "__MODEL__", "-p", "hi", "--tools", "/no/tools.json"], "cannot read tools file"),
])
def test_errors_are_one_line_without_traceback(model_dir, args, needle):
    args = [model_dir if a == "__MODEL__" else a for a in args]
    p = cactus(*args)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr


def test_no_default_model_gives_one_line(tmp_path):
    p = cactus("run", "-p", "hi", env={"CACTUS_DEFAULT_MODEL": str(tmp_path / "absent")})
    assert p.returncode != 0 and "Traceback" not in p.stderr
