"""Cactus against llama.cpp on the same weights and the same CPU, in one run.

    python benchmarks/vs_llamacpp.py [--models llama-3.2-1b,qwen3-0.6b] [--threads 2]
                                     [--repeats 3] [--backend auto] [--bits 4] [--head int8,cq6,cq5]
                                     [--widen] [--json OUT]

1. Builds ``llama-bench`` and ``llama-quantize`` from the ``llama-cpp-python`` source
   package (which carries llama.cpp whole) in a temporary folder; nothing of it is
   kept or committed.  ``--llama-cpp DIR`` reuses a build.
2. Makes random-init models of real shapes (full vocabulary) as Hugging Face
   safetensors checkpoints, writes the same weights as GGUF F16 with llama.cpp's own
   ``gguf`` package, and quantizes them to Q4_0 and Q4_K_M with ``llama-quantize``.
3. Converts the checkpoint to a Cactus bundle (``cactus convert --bits``) when the
   quantizer plugin is installed; the float checkpoint is always measured too.
   ``--head H1,H2`` measures one bundle per ``cactus convert --head`` choice; where the
   default bundle exists already, the others are derived from it by quantizing only
   the embedding / output head again (:func:`derive_head`).  Bundles are converted
   ``--no-calibrate`` (random weights: only speed is measured), so cq4 is plain 4-bit;
   ``--widen`` adds a copy with a stand-in of cq4's widening at 4.25 bits per weight
   (:func:`widened_plan`), to measure what the 5- and 6-bit tensors cost in speed.
4. Runs pp512 and tg128 for both engines on the same thread count, alternating
   engine by engine for every repeat, and prints tokens/s, the ratios to llama.cpp
   Q4_K_M, peak RSS, and the decode roofline: decode tokens/s times the bytes read per
   token over the memory read bandwidth sampled right after that run (median over the
   repeats). Bytes read per token: the weights file, less an embedding table stored
   apart from the output head (:func:`bytes_read_per_token`).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPES = {
    "llama-3.2-1b": dict(arch="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                         rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True),
    "qwen3-0.6b": dict(arch="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
}
GGUF_TYPES = ("Q4_0", "Q4_K_M", "F16")


def sh(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


# Runs argv[2:] as its own child and writes that child's peak RSS (wait4) to the file argv[1].
# A child exec'd straight from this process would not do: on exec Linux carries the old
# address space's high-water mark into ru_maxrss, so it would report this process's peak
# (several GB after making a 1B checkpoint), not its own. The runner's is ~10 MB.
_RUNNER = ("import os, subprocess, sys\n"
           "p = subprocess.Popen(sys.argv[2:])\n"
           "_, status, usage = os.wait4(p.pid, 0)\n"
           "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
           "sys.exit(os.waitstatus_to_exitcode(status))\n")


def timed_child(cmd: list[str], env=None) -> tuple[str, float]:
    """Run a command; return its stdout and its own peak RSS in MB (wait4's, through _RUNNER)."""
    with tempfile.TemporaryFile("w+") as err, tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        proc = subprocess.run([sys.executable, "-c", _RUNNER, rss.name, *cmd], stdout=subprocess.PIPE,
                              stderr=err, text=True, env=env)
        if proc.returncode:
            err.seek(0)
            tail = err.read().strip().splitlines()[-1:]
            raise RuntimeError(f"{os.path.basename(cmd[0])} {' '.join(cmd[1:4])}... failed: {tail}")
        peak = int(rss.read() or 0)
    return proc.stdout, peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0)  # bytes on macOS


# --- llama.cpp ----------------------------------------------------------------------------
def build_llamacpp(work: str) -> tuple[str, str]:
    """Build llama-bench and llama-quantize from the llama-cpp-python sdist; return (bin dir, gguf-py)."""
    sh([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
        "llama-cpp-python", "-d", work])
    tarball = glob.glob(os.path.join(work, "llama_cpp_python-*.tar.gz"))[0]
    sh(["tar", "xzf", tarball, "-C", work])
    src = glob.glob(os.path.join(work, "llama_cpp_python-*", "vendor", "llama.cpp"))[0]
    return compile_llamacpp(src)


def compile_llamacpp(src: str) -> tuple[str, str]:
    build = os.path.join(src, "build")
    if not os.path.exists(os.path.join(build, "bin", "llama-bench")):
        flags = []
        if platform.machine().lower() in ("x86_64", "amd64"):
            # -march=native turns on ggml's AMX matmul where the CPU has AMX; on this VM's Sapphire
            # Rapids it segfaults in ggml_backend_amx_mul_mat on the first Q4_K_M batch (llama.cpp
            # 0.3.36's vendor tree, with AMX tiles granted to the process). Without it llama.cpp
            # keeps its AVX-512 kernels and repacked Q4_K layout; only the AMX buffer type goes.
            noamx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
            flags = [f"-DCMAKE_C_FLAGS={noamx}", f"-DCMAKE_CXX_FLAGS={noamx}"]
        sh(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF",
            "-DGGML_NATIVE=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF", *flags])
        sh(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "llama-bench", "llama-quantize"])
    return os.path.join(build, "bin"), os.path.join(src, "gguf-py")


def write_gguf(ckpt: str, shape: dict, out: str, gguf_py: str) -> None:
    """Write the checkpoint's exact weights as an F16 GGUF (llama.cpp's tensor names and layout)."""
    sys.path.insert(0, gguf_py)
    import gguf
    from safetensors.numpy import load_file

    arch = shape["arch"]
    w = {}
    for f in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        w.update(load_file(f))
    H, Hkv, d = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    writer = gguf.GGUFWriter(out, arch)
    writer.add_context_length(4096)
    writer.add_embedding_length(shape["hidden_size"])
    writer.add_block_count(shape["num_hidden_layers"])
    writer.add_feed_forward_length(shape["intermediate_size"])
    writer.add_head_count(H)
    writer.add_head_count_kv(Hkv)
    writer.add_key_length(d)
    writer.add_value_length(d)
    writer.add_rope_freq_base(shape["rope_theta"])
    writer.add_layer_norm_rms_eps(shape["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    V = shape["vocab_size"]
    # A placeholder SentencePiece-style vocabulary: llama-bench feeds random token ids.
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<t{i}>".encode() for i in range(V)])
    writer.add_token_scores([0.0] * V)
    writer.add_token_types([gguf.TokenType.NORMAL] * V)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)

    def permute(t, heads):  # HF rotate-half -> GGUF interleaved rope layout (llama arch only)
        return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)

    def put(name, t):
        t = np.asarray(t)
        writer.add_tensor(name, t.astype(np.float32 if t.ndim == 1 else np.float16))

    put("token_embd.weight", w["model.embed_tokens.weight"])
    for i in range(shape["num_hidden_layers"]):
        p = f"model.layers.{i}."
        q, k = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            q, k = permute(q, H), permute(k, Hkv)
        put(f"blk.{i}.attn_q.weight", q)
        put(f"blk.{i}.attn_k.weight", k)
        put(f"blk.{i}.attn_v.weight", w[p + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", w[p + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_gate.weight", w[p + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", w[p + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", w[p + "mlp.down_proj.weight"])
        put(f"blk.{i}.attn_norm.weight", w[p + "input_layernorm.weight"])
        put(f"blk.{i}.ffn_norm.weight", w[p + "post_attention_layernorm.weight"])
        if arch == "qwen3":
            put(f"blk.{i}.attn_q_norm.weight", w[p + "self_attn.q_norm.weight"])
            put(f"blk.{i}.attn_k_norm.weight", w[p + "self_attn.k_norm.weight"])
    put("output_norm.weight", w["model.norm.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def llama_bench(bin_dir: str, gguf_path: str, threads: int, pp: int, tg: int) -> dict:
    cmd = [os.path.join(bin_dir, "llama-bench"), "-m", gguf_path, "-p", str(pp), "-n", str(tg),
           "-t", str(threads), "-r", "1", "-o", "json"]
    out, peak = timed_child(cmd)
    rows = json.loads(out)
    res = {"peak_rss_mb": peak}
    for r in rows:
        key = "prefill_tps" if r.get("n_prompt") else "decode_tps"
        res[key] = r["avg_ts"]
    return res


# --- Cactus ---------------------------------------------------------------------------------
def cactus_bench(model_dir: str, threads: int, pp: int, tg: int, backend: str) -> dict:
    cmd = [sys.executable, "-m", "cactus_core.cli", "benchmark", model_dir, "--prompt-tokens", str(pp),
           "--gen-tokens", str(tg), "--repeats", "1", "--threads", str(threads), "--backend", backend, "--json"]
    out, _ = timed_child(cmd, env={**os.environ, "CACTUS_THREADS": str(threads)})
    r = json.loads(out[out.index("{"):])
    return {"prefill_tps": r["prefill_tps"]["median"], "decode_tps": r["decode_tps"]["median"],
            "peak_rss_mb": r["peak_rss_mb"], "backend": r["backend"]}


def make_checkpoint(name: str, shape: dict, out: str, seed: int = 0) -> str:
    import torch
    import transformers

    cfg = {k: v for k, v in shape.items() if k != "arch"}
    cfg["max_position_embeddings"] = 4096
    torch.manual_seed(seed)
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
           "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM)}[shape["arch"]]
    with torch.device("meta"):
        model = cls[1](cls[0](**cfg))
    model = model.to_empty(device="cpu").to(torch.float16)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="20GB")
    write_placeholder_tokenizer(out, shape["vocab_size"])
    return out


def write_placeholder_tokenizer(out: str, vocab: int) -> None:
    """A word-level vocabulary of the model's size: the benchmark feeds random token ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"<t{i}>": i for i in range(vocab)}, unk_token="<t0>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(out, "tokenizer.json"))


#: numpy dtype name -> safetensors dtype string, for the arrays a quantized tensor holds
SAFETENSORS_DTYPES = {"uint8": "U8", "float16": "F16", "float32": "F32"}


def checkpoint_tensors(ckpt: str) -> dict:
    """name -> (safetensors dtype, memory-mapped array) of every tensor of a checkpoint."""
    from cactus_quant.convert import read_safetensors

    src = {}
    for f in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        src.update(read_safetensors(f))
    return src


def store(tensors: dict, manifest: dict, name: str, qt) -> None:
    """Put quantized tensor ``qt`` into a bundle's tensors and manifest under ``name``."""
    tensors.update({key: (SAFETENSORS_DTYPES[a.dtype.name], a) for key, a in qt.named_arrays(name).items()})
    manifest[name] = qt.manifest_entry()


def read_cactus_json(bundle: str) -> dict:
    with open(os.path.join(bundle, "cactus.json")) as f:
        return json.load(f)


def write_derived(bundle: str, out: str, tensors: dict, cactus: dict) -> None:
    """``out``: ``bundle``'s other files with these tensors and this cactus.json, written under a
    temporary name and renamed into place."""
    import shutil

    from cactus_quant.convert import write_safetensors

    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in os.listdir(bundle):
        if f not in ("model.safetensors", "cactus.json"):
            shutil.copy2(os.path.join(bundle, f), tmp)
    write_safetensors(os.path.join(tmp, "model.safetensors"), tensors)
    with open(os.path.join(tmp, "cactus.json"), "w") as f:
        json.dump(cactus, f, indent=1)
    os.rename(tmp, out)


def derive_head(bundle: str, ckpt: str, head: str, out: str) -> None:
    """A copy of ``bundle`` whose embedding / output head is stored as ``cactus convert
    --head head`` stores it, quantized from the checkpoint's float weights; the block
    weights are kept byte for byte (converting a 1B model's blocks again takes many
    minutes and cannot change the head).  A tied model's duplicate ``lm_head.weight``
    is dropped, as convert drops it."""
    from cactus_core.formats import BFloat16
    from cactus_quant.convert import _is_head, head_quantizer, read_safetensors

    src, cactus = checkpoint_tensors(ckpt), read_cactus_json(bundle)
    with open(os.path.join(ckpt, "config.json")) as f:
        tied = json.load(f).get("tie_word_embeddings", False)
    tensors = read_safetensors(os.path.join(bundle, "model.safetensors"))
    manifest, quantizer = cactus["quantization"]["tensors"], head_quantizer(head)
    for name, (dt, arr) in src.items():
        if not _is_head(name, dt, arr):
            continue
        for key in [k for k in tensors if k == name or k.startswith(name + ".")]:
            del tensors[key]
        manifest.pop(name, None)
        if name == "lm_head.weight" and tied:
            continue  # the loader ties the head to the embedding
        if quantizer is None:
            tensors[name] = (dt, arr)
            continue
        store(tensors, manifest, name, quantizer.quantize(name, BFloat16(arr) if dt == "BF16" else arr))
    cactus["quantization"]["head"] = head
    write_derived(bundle, out, tensors, cactus)


def widened_plan(shapes: dict[str, tuple[int, int]], budget: float) -> dict[str, int]:
    """Widths for a stand-in of cq4's widening on random weights, which have no sensitivity to
    measure (a plan needs a trained model's KL): every v_proj at 6 bits, then every k_proj, then
    q_proj and o_proj from the outer layers inwards at 5, each while the block linears stay
    within ``budget`` bits per weight.  It is the shape of the plans measured on the default
    model (docs/quantization.md, session 14: attention first, the first and last layers most)."""
    import re

    from cactus_quant.widen import WidenedCQQuantizer

    q = WidenedCQQuantizer()
    layer = {n: int(re.search(r"\.(\d+)\.", n).group(1)) for n in shapes}
    last = max(layer.values())
    outer = sorted(shapes, key=lambda n: min(layer[n], last - layer[n]))
    order = ([(n, 6) for n in shapes if n.endswith("v_proj.weight")]
             + [(n, 6) for n in shapes if n.endswith("k_proj.weight")]
             + [(n, 5) for n in outer if n.endswith(("q_proj.weight", "o_proj.weight"))])
    size = {n: s[0] * s[1] for n, s in shapes.items()}
    bits = {n: q.inner[4].bits_for_shape(s) * size[n] for n, s in shapes.items()}
    room = budget * sum(size.values()) - sum(bits.values())
    plan = {}
    for n, b in order:
        extra = q.inner[b].bits_for_shape(shapes[n]) * size[n] - bits[n]
        if extra <= room:
            plan[n], room = b, room - extra
    return plan


def derive_widened(bundle: str, ckpt: str, out: str) -> dict[str, int]:
    """A copy of the plain cq4 ``bundle`` with the tensors of :func:`widened_plan` coded again,
    data-free, at their wider width; returns the plan."""
    from cactus_core.formats import BFloat16
    from cactus_quant.convert import read_safetensors
    from cactus_quant.widen import BUDGET_BPW, WidenedCQQuantizer

    src, cactus = checkpoint_tensors(ckpt), read_cactus_json(bundle)
    manifest = cactus["quantization"]["tensors"]
    blocks = {n: tuple(e["shape"]) for n, e in manifest.items() if ".layers." in n and e["format"] == "cq"}
    plan, q = widened_plan(blocks, BUDGET_BPW), WidenedCQQuantizer()
    tensors = read_safetensors(os.path.join(bundle, "model.safetensors"))
    for name, b in plan.items():
        dt, arr = src[name]
        store(tensors, manifest, name, q.quantize(name, BFloat16(arr) if dt == "BF16" else arr, bits=b))
    cactus["quantization"]["bits_per_weight"] = sum(
        q.inner[plan.get(n, 4)].bits_for_shape(s) * s[0] * s[1] for n, s in blocks.items()) / sum(
        s[0] * s[1] for s in blocks.values())
    write_derived(bundle, out, tensors, cactus)
    return plan


def cactus_bundle(ckpt: str, base: str, bits: str, head: str) -> str:
    """The bundle of ``ckpt`` at ``bits`` with ``head`` ("" = convert's default), made if missing."""
    from cactus_core.convert_cli import DEFAULT_HEAD

    head = "" if head == DEFAULT_HEAD else head
    out = base if not head else f"{base}-head-{head}"
    if os.path.exists(os.path.join(out, "cactus.json")):
        return out
    if head and os.path.exists(os.path.join(base, "cactus.json")):
        derive_head(base, ckpt, head, out)
        return out
    cmd = [sys.executable, "-m", "cactus_core.cli", "convert", ckpt, out, "--bits", bits, "--no-calibrate"]
    conv = subprocess.run(cmd + (["--head", head] if head else []), capture_output=True, text=True)  # speed only
    if conv.returncode != 0 and not os.path.exists(os.path.join(out, "cactus.json")):
        raise RuntimeError(f"cactus convert failed: {conv.stderr.strip().splitlines()[-1:]}")
    return out


def bytes_read_per_token(path: str, kind: str) -> int:
    """Bytes of weights a decoded token reads: the file, less a token embedding table
    that is stored apart from the output head (only one row of it is read).

    A GGUF of a tied model holds the table once (it is the head); a safetensors
    checkpoint or bundle may hold both ``model.embed_tokens.weight`` and
    ``lm_head.weight`` (transformers' tied save, and convert, keep both names).
    """
    if kind == "llama":
        return os.path.getsize(path)
    total, embed, has_head = 0, 0, False
    for f in glob.glob(os.path.join(path, "*.safetensors")):
        total += os.path.getsize(f)
        with open(f, "rb") as fh:
            header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            size = info["data_offsets"][1] - info["data_offsets"][0]
            if name.startswith("model.embed_tokens.weight"):
                embed += size
            has_head |= name.startswith("lm_head.weight")
    return total - embed if has_head else total


class Bandwidth:
    """Memory read bandwidth with ``threads`` threads reducing slices of a large array.

    The array is made once and kept, so a sample costs well under a second and can be
    taken beside every run: on this shared VM samples fall in two clusters a minute apart
    (29-36 and 51-60 GB/s in one benchmark), so a roofline divided by one sample, or by
    the best, says more about the neighbours than about the engine."""

    def __init__(self, threads: int, size_mb: int = 1024):
        # Random bytes, written once: never-written or constant pages can read as the shared
        # zero page or be merged by the VM, and then "bandwidth" is cache speed.
        self.a = np.random.default_rng(0).random(size_mb * 2**20 // 8)
        self.parts = np.array_split(self.a, threads)

    def sample(self, passes: int = 3) -> float:
        """GB/s: the best of ``passes`` (a ceiling for the moment, so the fastest pass counts)."""
        import threading

        times = []
        for _ in range(passes):
            # max, not sum: numpy's pairwise float sum is compute-bound on Zen 5 (21.6 GB/s on one
            # core, against 37.5 for max), so the sample was below what decode itself read.
            # numpy drops the GIL in both.
            workers = [threading.Thread(target=p.max) for p in self.parts]
            t = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            times.append(time.perf_counter() - t)
        return self.a.nbytes / min(times) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-3.2-1b,qwen3-0.6b")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeats", type=int, default=3, help="0 only prepares the models")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--bits", default="4", help="Cactus bundle bits for cactus convert ('' to skip)")
    ap.add_argument("--head", default="",
                    help="comma-separated cactus convert --head choices, one bundle each (default: convert's)")
    ap.add_argument("--gguf", default=",".join(GGUF_TYPES),
                    help="comma-separated llama.cpp types to run (Q4_K_M, the ratios' base, always runs)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--no-float", action="store_true", help="skip Cactus on the float16 checkpoint")
    ap.add_argument("--widen", action="store_true",
                    help="also run the default-head cq4 bundle with a stand-in of cq4's widening (widened_plan)")
    ap.add_argument("--llama-cpp", help="an existing llama.cpp source tree to build/use")
    ap.add_argument("--workdir", help="keep files here instead of a temporary folder")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    wanted = set(args.gguf.split(",")) | {"Q4_K_M"}  # the ratios' base always runs
    work = args.workdir or tempfile.mkdtemp(prefix="cactus-vs-llamacpp-")
    os.makedirs(work, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    bin_dir, gguf_py = compile_llamacpp(args.llama_cpp) if args.llama_cpp else build_llamacpp(work)
    # Each run's roofline divides by a bandwidth sample taken right after it (Bandwidth);
    # the table gives the median of those fractions, and every sample is kept.
    probe = Bandwidth(args.threads)
    samples = [probe.sample()]
    print(f"memory read bandwidth: {samples[0]:.1f} GB/s ({args.threads} threads reducing 1 GiB)", flush=True)
    results = {"threads": args.threads, "bandwidth_gbs": samples[0], "bandwidth_samples_gbs": samples, "models": {}}
    for name in args.models.split(","):
        shape = SHAPES[name]
        ckpt = os.path.join(work, name)
        if not os.path.exists(os.path.join(ckpt, "config.json")):
            make_checkpoint(name, shape, ckpt)
        if not os.path.exists(os.path.join(ckpt, "tokenizer.json")):
            write_placeholder_tokenizer(ckpt, shape["vocab_size"])
        engines = {}
        f16 = os.path.join(work, f"{name}-F16.gguf")
        if not os.path.exists(f16):
            write_gguf(ckpt, shape, f16, gguf_py)
        for q in (q for q in GGUF_TYPES if q in wanted):
            path = os.path.join(work, f"{name}-{q}.gguf")
            if q != "F16" and not os.path.exists(path):
                sh([os.path.join(bin_dir, "llama-quantize"), f16, path, q])
            engines[f"llama.cpp {q}"] = ("llama", path)
        if not args.no_float:
            engines["cactus f16"] = ("cactus", ckpt)
        for head in (args.head.split(",") if args.bits else []):
            try:
                bundle = cactus_bundle(ckpt, os.path.join(work, f"{name}-cq{args.bits}"), args.bits, head.strip())
                engines[f"cactus cq{args.bits}" + (f" h{head.strip()}" if head.strip() else "")] = ("cactus", bundle)
            except RuntimeError as exc:
                print(f"skipping the Cactus bundle: {exc}", flush=True)
        base = os.path.join(work, f"{name}-cq{args.bits}")
        if args.widen and args.bits == "4" and os.path.exists(os.path.join(base, "cactus.json")):
            wide = base + "-widened"
            if not os.path.exists(os.path.join(wide, "cactus.json")):
                plan = derive_widened(base, ckpt, wide)
                print(f"{name}: widened {len(plan)} tensors ({sum(b == 6 for b in plan.values())} to 6 bits)",
                      flush=True)
            engines["cactus cq4 widened"] = ("cactus", wide)
        if args.repeats == 0:
            print(f"{name}: prepared {', '.join(engines)}", flush=True)
            continue
        read = {label: bytes_read_per_token(path, kind) for label, (kind, path) in engines.items()}
        runs = {k: [] for k in engines}
        for rep in range(args.repeats):
            for label, (kind, path) in engines.items():  # alternate engines within each repeat
                r = (llama_bench(bin_dir, path, args.threads, args.pp, args.tg) if kind == "llama"
                     else cactus_bench(path, args.threads, args.pp, args.tg, args.backend))
                r["bandwidth_gbs"] = probe.sample()
                samples.append(r["bandwidth_gbs"])
                r["roofline_fraction"] = r.get("decode_tps", 0) * read[label] / (r["bandwidth_gbs"] * 1e9)
                runs[label].append(r)
                print(f"{name} rep {rep + 1} {label}: pp{args.pp} {r.get('prefill_tps', 0):.1f} t/s, "
                      f"tg{args.tg} {r.get('decode_tps', 0):.2f} t/s, {r['roofline_fraction']:.0%} of "
                      f"{r['bandwidth_gbs']:.1f} GB/s", flush=True)
        table = {}
        for label, rs in runs.items():
            table[label] = {k: statistics.median(r[k] for r in rs)
                            for k in ("prefill_tps", "decode_tps", "peak_rss_mb", "bandwidth_gbs",
                                      "roofline_fraction")}
            kind, path = engines[label]
            size = (os.path.getsize(path) if kind == "llama"
                    else sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors"))))
            table[label]["file_mb"] = size / 2**20
            table[label]["read_mb"] = read[label] / 2**20
            table[label]["roofline_tps"] = table[label]["bandwidth_gbs"] * 1e9 / max(read[label], 1)
        results["models"][name] = table
        base = table.get("llama.cpp Q4_K_M", {})
        print(f"\n{name}: median of {args.repeats}, {args.threads} threads")
        print(f"{'engine':<18}{'pp t/s':>10}{'tg t/s':>10}{'pp ratio':>10}{'tg ratio':>10}"
              f"{'peak MB':>10}{'file MB':>10}{'read MB':>10}{'tg/roof':>9}")
        for label, t in table.items():
            ppr = t["prefill_tps"] / base["prefill_tps"] if base else float("nan")
            tgr = t["decode_tps"] / base["decode_tps"] if base else float("nan")
            print(f"{label:<18}{t['prefill_tps']:>10.1f}{t['decode_tps']:>10.2f}{ppr:>10.2f}{tgr:>10.2f}"
                  f"{t['peak_rss_mb']:>10.0f}{t['file_mb']:>10.0f}{t['read_mb']:>10.0f}"
                  f"{t['roofline_fraction']:>9.0%}")
        over = [label for label, t in table.items() if t["roofline_fraction"] > 1]
        if over:
            print(f"note: {', '.join(over)} decoded faster than the bandwidth sampled after it allows: "
                  "the sample is too low, read tg/roof as relative", flush=True)
    samples.append(probe.sample())
    results["bandwidth_gbs"] = statistics.median(samples)
    spread = max(samples) / min(samples)
    print(f"bandwidth: {len(samples)} samples, median {statistics.median(samples):.1f} GB/s, "
          f"{min(samples):.1f}-{max(samples):.1f} (spread {spread:.2f}x"
          f"{'; over 1.2x: the machine was not quiet, so each run is divided by its own sample' if spread > 1.2 else ''})",
          flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
