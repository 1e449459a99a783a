"""Fetching checkpoints from the Hugging Face hub (``cactus download``).

Uses ``huggingface_hub`` so ``HF_ENDPOINT``, ``HF_HOME``/the shared cache,
``HF_TOKEN`` and ``HF_HUB_OFFLINE`` behave as in every other HF tool.  Only the
files an inference engine needs are fetched (configs, tokenizer, safetensors;
PyTorch ``.bin`` weights only when a repository has no safetensors).

``cactus run ORG/NAME`` goes one step further, as Cactus does: the first run
downloads the checkpoint and converts it into a CQ4 bundle under the Cactus
cache (``$CACTUS_CACHE``, default ``~/.cache/cactus``); later runs load that
bundle without touching the network (:func:`bundle_for`).
"""

from __future__ import annotations

import os
import re
from typing import Optional

from .errors import ModelLoadError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PATTERNS = ["*.json", "*.safetensors", "*.jinja", "tokenizer.model", "*.txt", "1_Pooling/*", "2_Normalize/*"]


def looks_like_repo_id(name: str) -> bool:
    """``org/name`` that is not an existing path."""
    return bool(REPO_ID.match(name)) and not os.path.exists(name)


def download(repo_id: str, revision: Optional[str] = None, local_only: bool = False) -> str:
    """Fetch (or find in the HF cache) a checkpoint; returns its local directory."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ModelLoadError("huggingface_hub is not installed: pip install huggingface_hub") from exc
    if not REPO_ID.match(repo_id):
        raise ModelLoadError(f"'{repo_id}' is not a Hugging Face repository id (expected org/name)")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        path = snapshot_download(repo_id, revision=revision, allow_patterns=PATTERNS,
                                 local_files_only=local_only)
        if not any(f.endswith(".safetensors") for f in os.listdir(path)) and not local_only:
            path = snapshot_download(repo_id, revision=revision, allow_patterns=PATTERNS + ["*.bin"])
    except GatedRepoError as exc:
        raise ModelLoadError(f"{repo_id} is gated; accept its licence on the hub and set HF_TOKEN") from exc
    except RepositoryNotFoundError as exc:
        raise ModelLoadError(f"repository {repo_id} was not found on {endpoint} (or needs HF_TOKEN)") from exc
    except RevisionNotFoundError as exc:
        raise ModelLoadError(f"revision '{revision}' of {repo_id} does not exist") from exc
    except LocalEntryNotFoundError as exc:
        if local_only:
            raise
        raise ModelLoadError(
            f"cannot download {repo_id}: {endpoint} is unreachable or offline mode is on "
            "(HF_HUB_OFFLINE); connect, or pass a local model directory"
        ) from exc
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelLoadError(f"cannot download {repo_id} from {endpoint}: {first}") from exc
    except Exception as exc:  # httpx/requests errors differ across hub versions
        if type(exc).__module__.split(".")[0] in ("httpx", "requests", "urllib3", "huggingface_hub"):
            raise ModelLoadError(
                f"cannot download {repo_id}: {endpoint} is unreachable ({type(exc).__name__}); "
                "connect, or pass a local model directory"
            ) from exc
        raise
    return path


def cached(repo_id: str, revision: Optional[str] = None) -> Optional[str]:
    """The checkpoint's directory if it is already in the HF cache, else None."""
    try:
        return download(repo_id, revision, local_only=True)
    except Exception:
        return None


def cache_dir() -> str:
    """Where converted bundles live: ``$CACTUS_CACHE`` or ``~/.cache/cactus``."""
    return os.environ.get("CACTUS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cactus")


def bundle_path(repo_id: str, revision: Optional[str] = None, bits: str = "4") -> str:
    """The cached bundle directory for ``repo_id`` at ``revision`` converted to CQ``bits``."""
    safe = repo_id.replace("/", "--")
    return os.path.join(cache_dir(), "bundles", f"{safe}--{revision or 'main'}--cq{bits}")


def bundle_for(repo_id: str, revision: Optional[str] = None, bits: str = "4", progress: bool = True,
               log=None) -> str:
    """A runnable local model for ``repo_id``: the cached bundle, else download and convert.

    Falls back to the downloaded float checkpoint (with a note on ``log``) when
    the quantizer plugin is not installed or the model has nothing to quantize.
    """
    out = bundle_path(repo_id, revision, bits)
    if os.path.exists(os.path.join(out, "cactus.json")):
        return out
    src = download(repo_id, revision)
    try:
        import cactus_quant  # noqa: F401
    except ImportError:
        if log:
            log(f"note: running {repo_id} unquantized (pip install ./quant to convert it to CQ{bits})")
        return src
    from .convert_cli import run_convert
    from .errors import QuantizationError
    from .models import model_module
    from .weights import read_json

    model_module(read_json(os.path.join(src, "config.json"), "config.json"))  # unsupported: one line, no convert
    if log:
        log(f"converting {repo_id} to CQ{bits} (once) -> {out}")
    try:
        run_convert(src, out, bits, "cq", force=True, progress=progress)  # the `cactus convert` defaults
    except QuantizationError as exc:
        if log:
            log(f"note: running {repo_id} unquantized: {exc}")
        return src
    return out


def add_download_command(sub) -> None:
    p = sub.add_parser("download", help="fetch a checkpoint from the Hugging Face hub")
    p.add_argument("repo_id")
    p.add_argument("--revision", default=None)
    p.set_defaults(func=_cmd_download)


def _cmd_download(args) -> int:
    print(download(args.repo_id, args.revision))
    return 0
