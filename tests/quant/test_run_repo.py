"""`cactus run ORG/NAME`: download through huggingface_hub, convert once, reuse the bundle.

The hub is a real HTTP server on 127.0.0.1 speaking the part of the Hugging Face
hub API that ``snapshot_download`` uses (repo info, tree listing, file resolve),
reached through ``HF_ENDPOINT`` exactly as the real hub would be.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytest.importorskip("cactus_quant", reason="the quantizer plugin is not installed (pip install ./quant)")

REPO, SHA = "tiny-org/tiny-chat", "0123456789abcdef0123456789abcdef01234567"


class FakeHub(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    requests: list[str] = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool):
        path = unquote(urlparse(self.path).path)
        self.requests.append(f"{self.command} {path}")
        api = f"/api/models/{REPO}/"
        if path.startswith(api + "revision/"):
            info = {"id": REPO, "sha": SHA, "siblings": [{"rfilename": f} for f in self.files]}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
        if path.startswith(api + "tree/"):
            tree = [{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in self.files.items()]
            return self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, head)
        prefix = f"/{REPO}/resolve/"
        if path.startswith(prefix):
            name = path[len(prefix):].split("/", 1)[1]
            if name in self.files:
                body = self.files[name]
                return self._send(200, body, {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'},
                                  head)
        self._send(404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound"}, head)

    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)


@pytest.fixture(scope="module")
def hub(tiny_chat):
    src = Path(tiny_chat)
    FakeHub.files = {f.name: f.read_bytes() for f in src.iterdir() if f.is_file()}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def cactus(*args, **env):
    return subprocess.run([sys.executable, "-m", "cactus_core.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "CACTUS_LOAD_PLUGINS": "quant", **env})


def hub_env(hub: str, tmp_path: Path) -> dict[str, str]:
    """The hub at ``hub`` through HF_ENDPOINT, with caches of this test's own."""
    return {"HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / "hf"), "CACTUS_CACHE": str(tmp_path / "cactus"),
            "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_XET": "1"}


def test_run_repo_id_downloads_converts_once_then_reuses(hub, tmp_path):
    env = hub_env(hub, tmp_path)
    FakeHub.requests.clear()
    first = cactus("run", REPO, "-p", "hi", "--max-tokens", "3", "--backend", "numpy_ref", "--json", **env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["success"]
    assert any(r.startswith("GET /" + REPO + "/resolve/") and r.endswith("model.safetensors")
               for r in FakeHub.requests)
    bundle = tmp_path / "cactus" / "bundles" / f"{REPO.replace('/', '--')}--main--cq4"
    manifest = json.loads((bundle / "cactus.json").read_text())
    assert manifest["quantization"]["scheme"] == "cq4"
    assert {e["format"] for e in manifest["quantization"]["tensors"].values()} >= {"cq"}
    # `cactus convert`'s default head: the tied embedding as a 64-level scalar CQ table
    assert manifest["quantization"]["head"] == "cq6"
    embed = manifest["quantization"]["tensors"]["model.embed_tokens.weight"]
    assert embed["format"] == "cq" and (embed["meta"]["index_bits"], embed["meta"]["vec_dim"]) == (6, 1)
    assert "converting" in first.stderr

    # Second run: the converted bundle is reused; the hub is not even asked, so offline works.
    FakeHub.requests.clear()
    second = cactus("run", REPO, "-p", "hi", "--max-tokens", "3", "--backend", "numpy_ref", "--json",
                    **{**env, "HF_HUB_OFFLINE": "1"})
    assert second.returncode == 0, second.stderr
    assert FakeHub.requests == [] and "converting" not in second.stderr
    assert json.loads(second.stdout)["response"] == json.loads(first.stdout)["response"]

    # The Python API resolves ORG/NAME the same way: to the converted bundle.
    api = subprocess.run([sys.executable, "-c", f"import cactus_core as c; print(c.load({REPO!r}, backend='numpy_ref').path)"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CACTUS_LOAD_PLUGINS": "quant", **env, "HF_HUB_OFFLINE": "1"})
    assert api.returncode == 0, api.stderr
    assert os.path.samefile(api.stdout.strip().splitlines()[-1], bundle)


def test_run_unknown_repo_on_hub_is_one_line(hub, tmp_path):
    p = cactus("run", "tiny-org/missing", "-p", "hi", HF_ENDPOINT=hub, HF_HOME=str(tmp_path / "hf"),
               CACTUS_CACHE=str(tmp_path / "c"), HF_HUB_OFFLINE="0")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "tiny-org/missing" in p.stderr


def test_run_repo_with_only_pytorch_bin_weights(hub, tmp_path):
    """Older repositories hold `pytorch_model.bin`: it is downloaded when there are no
    safetensors, read through torch and converted like any other checkpoint."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import load

    saved = dict(FakeHub.files)
    state = load(saved["model.safetensors"])
    torch.save(state, tmp_path / "pytorch_model.bin")
    FakeHub.files = {n: b for n, b in saved.items() if not n.endswith(".safetensors")}
    FakeHub.files["pytorch_model.bin"] = (tmp_path / "pytorch_model.bin").read_bytes()
    try:
        FakeHub.requests.clear()
        run = cactus("run", REPO, "-p", "hi", "--max-tokens", "3", "--backend", "numpy_ref", "--json",
                     **hub_env(hub, tmp_path))
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["success"]
        assert any(r.endswith("/pytorch_model.bin") for r in FakeHub.requests if r.startswith("GET"))
        bundle = tmp_path / "cactus" / "bundles" / f"{REPO.replace('/', '--')}--main--cq4"
        assert json.loads((bundle / "cactus.json").read_text())["quantization"]["scheme"] == "cq4"
    finally:
        FakeHub.files = saved

