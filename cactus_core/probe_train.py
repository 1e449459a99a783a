"""``cactus probe train``: label the local model's answers, fit and calibrate a probe,
compare it with the entropy baseline, and write it into the bundle."""

from __future__ import annotations

import json
import os
import shutil
from typing import Optional

import numpy as np

from .errors import BadRequestError, CactusError
from .probe import PROBE_FILE, auroc, fit_probe, fit_temperature, grade
from .routing import DEFAULT_THRESHOLD, EntropyRouter, Prefill, Router
from .weights import BUNDLE_MANIFEST


class _Recorder(Router):
    """Answers locally and keeps what a router would have seen at prefill."""

    def __init__(self, layers):
        super().__init__()
        self.layers = tuple(layers)
        self.last: Optional[Prefill] = None

    def score(self, prefill: Prefill) -> float:
        self.last = prefill
        return 1.0


def read_examples(path: str) -> list[dict]:
    """Examples from JSONL: ``messages``, optional ``tools``, and ``reference`` or ``label``."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
    except OSError as exc:
        raise BadRequestError(f"cannot read {path}: {exc.strerror}") from exc
    out = []
    for i, line in enumerate(lines, 1):
        try:
            ex = json.loads(line)
        except ValueError as exc:
            raise BadRequestError(f"{path} line {i} is not valid JSON: {exc}") from exc
        if not isinstance(ex, dict) or "messages" not in ex or not ("reference" in ex or "label" in ex):
            raise BadRequestError(f"{path} line {i} needs 'messages' and a 'reference' or 'label'")
        out.append(ex)
    if len(out) < 20:
        raise BadRequestError(f"{path} has {len(out)} examples; a probe needs at least 20")
    return out


def collect(engine, examples: list[dict], max_tokens: int = 96, progress: bool = True):
    """Run the model on every example: features per layer, correctness, entropy confidence."""
    from tqdm import tqdm

    recorder = _Recorder(range(engine.model.n_layers))
    saved = engine._router
    engine._router = recorder
    feats, labels, entropy = [], [], []
    try:
        for ex in tqdm(examples, desc="grading", unit="ex", disable=not progress):
            r = engine.complete(ex["messages"], tools=ex.get("tools"), max_tokens=max_tokens, cloud=False)
            if not r["success"]:
                raise BadRequestError(f"an example failed to run: {r['error']}")
            pre = recorder.last
            feats.append(np.stack([pre.hidden[i].reshape(-1, pre.hidden[i].shape[-1])[-1]
                                   for i in recorder.layers]))
            labels.append(grade(r, ex))
            entropy.append(EntropyRouter().score(pre))
    finally:
        engine._router = saved
    return np.stack(feats).astype(np.float64), np.array(labels, float), np.array(entropy)


def _choose_layer(x: np.ndarray, y: np.ndarray, seed: int) -> tuple[int, list[float]]:
    """Layer whose linear probe has the best 3-fold cross-validated AUROC."""
    folds = np.random.default_rng(seed).permutation(len(y)) % 3
    scores = []
    for layer in range(x.shape[1]):
        s = np.zeros(len(y))
        for k in range(3):
            tr, te = folds != k, folds == k
            if len(set(y[tr])) < 2:
                continue
            s[te] = fit_probe(x[tr, layer], y[tr], layer, hidden=0, steps=200).logit(x[te, layer])
        scores.append(auroc(s, y))
    best = int(np.nanargmax(scores)) if not np.all(np.isnan(scores)) else x.shape[1] - 1
    return best, scores


def train(engine, data_path: str, out_dir: str, *, max_tokens: int = 96, layer: Optional[int] = None,
          hidden: int = 32, threshold: float = DEFAULT_THRESHOLD, seed: int = 0, force: bool = False,
          progress: bool = True) -> dict:
    """Train, calibrate, evaluate and write a probe; returns the report."""
    examples = read_examples(data_path)
    x, y, ent = collect(engine, examples, max_tokens, progress)
    if len(set(y)) < 2:
        raise CactusError(f"the model got {'every' if y.all() else 'no'} example right; "
                          "a probe needs both right and wrong answers to learn from")
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = max(len(y) // 4, 5)
    test, rest = order[:n_test], order[n_test:]
    n_cal = max(len(rest) // 5, 4)
    cal, fit = rest[:n_cal], rest[n_cal:]
    cv = None
    if layer is None:
        layer, cv = _choose_layer(x[rest], y[rest], seed)
    probe = fit_probe(x[fit, layer], y[fit], layer, hidden=hidden, seed=seed)
    probe.temperature = fit_temperature(probe.logit(x[cal, layer]), y[cal])
    conf = probe.confidence(x[test, layer])
    local = conf >= threshold
    report = {
        "examples": int(len(y)), "accuracy": float(y.mean()), "layer": int(layer),
        "probe_params": int(probe.n_params), "temperature": probe.temperature,
        "test_examples": int(len(test)), "probe_auroc": auroc(conf, y[test]),
        "entropy_auroc": auroc(ent[test], y[test]), "threshold": threshold,
        "test_local_fraction": float(local.mean()),
        "test_local_accuracy": float(y[test][local].mean()) if local.any() else None,
        "layer_cv_auroc": cv,
    }
    cats = [ex.get("category") for ex in examples]
    if any(c is not None for c in cats):  # labelled data: the model's exact rate per kind of request
        report["accuracy_by_category"] = {str(c): float(y[[k == c for k in cats]].mean()) for c in sorted(
            set(cats), key=str)}
    _write(engine.path, out_dir, probe, report, force)
    return report


def _write(model_dir: str, out_dir: str, probe, report: dict, force: bool) -> None:
    same = os.path.abspath(model_dir) == os.path.abspath(out_dir)
    if not same:
        if os.path.exists(out_dir):
            if not force:
                raise CactusError(f"{out_dir} exists; pass --force to replace it")
            shutil.rmtree(out_dir)
        shutil.copytree(model_dir, out_dir)
    probe.save(os.path.join(out_dir, PROBE_FILE))
    path = os.path.join(out_dir, BUNDLE_MANIFEST)
    manifest = {"format_version": 1, "source": os.path.basename(os.path.normpath(model_dir))}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    manifest["probe"] = {"file": PROBE_FILE, "threshold": report["threshold"], "layer": report["layer"],
                         "auroc": report["probe_auroc"], "entropy_auroc": report["entropy_auroc"]}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    os.replace(tmp, path)


def add_probe_command(sub) -> None:
    """``cactus probe train MODEL DATA.jsonl OUT``."""
    p = sub.add_parser("probe", help="train the confidence probe that decides cloud handoff")
    psub = p.add_subparsers(dest="probe_command", metavar="ACTION", required=True)
    t = psub.add_parser("train", help="label answers, fit and calibrate a probe, write it into a bundle")
    t.add_argument("model")
    t.add_argument("data", help="JSONL: messages, optional tools, and reference or label")
    t.add_argument("out", help="bundle directory to write (may be MODEL itself)")
    t.add_argument("--max-tokens", type=int, default=96)
    t.add_argument("--layer", type=int, default=None, help="layer to read (default: chosen by CV)")
    t.add_argument("--hidden", type=int, default=32, help="MLP width; 0 = linear")
    t.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--backend", default="auto")
    t.add_argument("--force", action="store_true")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_cmd_train)


def _cmd_train(args) -> int:
    from .engine import Engine

    engine = Engine.load(args.model, backend=args.backend)
    report = train(engine, args.data, args.out, max_tokens=args.max_tokens, layer=args.layer,
                   hidden=args.hidden, threshold=args.threshold, seed=args.seed, force=args.force)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"examples {report['examples']}, local accuracy {report['accuracy']:.3f}, layer {report['layer']}, "
              f"{report['probe_params']} parameters, temperature {report['temperature']:.3f}")
        print(f"held-out AUROC: probe {report['probe_auroc']:.3f} vs entropy {report['entropy_auroc']:.3f} "
              f"({report['test_examples']} examples)")
        print(f"wrote {os.path.join(args.out, PROBE_FILE)} (threshold {report['threshold']})")
    return 0
