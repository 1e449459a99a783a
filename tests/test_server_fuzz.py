"""schemathesis generates requests from the server's own OpenAPI schema; none may get a 5xx."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import cactus_core as cactus
from cactus_core.server import create_app
from test_server import Server
from tinybert import make_bert_model
from tinymodel import make_chat_model

ST = shutil.which("schemathesis") or os.path.join(os.path.dirname(sys.executable), "schemathesis")


@pytest.mark.skipif(not os.path.exists(ST), reason="schemathesis is not installed (pip install schemathesis)")
def test_no_server_errors_for_schema_generated_requests(tmp_path):
    engine = cactus.load(make_chat_model(tmp_path / "chat"), context_length=256)
    embedder = cactus.load(make_bert_model(tmp_path / "bert"))
    server = Server(create_app(engine, embedder=embedder))
    try:
        p = subprocess.run(
            [ST, "run", server.url + "/openapi.json", "--checks", "not_a_server_error",
             "--max-examples", "25", "--workers", "1", "--seed", "1", "--phases", "examples,coverage,fuzzing"],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""},
        )
    finally:
        server.stop()
    assert p.returncode == 0, p.stdout[-3000:]
    assert " passed" in p.stdout and "Server error" not in p.stdout
