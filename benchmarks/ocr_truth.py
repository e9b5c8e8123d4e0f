"""OCR judged against the truth: which images really show their own word, and how fast each side knows.

The set (:func:`benchmarks._ocrset.write_truth_set`, ``--per-cap`` photos per cap height, ``--seed``):
web-shaped photos (500-1,600 px long side, 30-400 KB JPEG), each three ways: its concept drawn at 1,
1.5, 2, 3, 5 or 8 % cap height (12 fonts, +-15 deg, light on dark or dark on light, straight on a busy
photo or on a sign's plate, a quarter partly occluded), the same photo without text, and the same
photo with an unrelated sign (a word far from the concept). Truth: the first kind shows its word, the
other two do not. ``--set hard`` (:data:`benchmarks._ocrset.HARD_WORDS`, results ``ocr_truth_hard``):
the same making with smaller words (0.75-5 % cap height), thin, light, condensed and narrow fonts, a
third of the texts steep (15-30 deg) and a third vertical (+-90 deg), and half the concepts two words
("ice cream", "traffic light").

Sides, each a NEW interpreter that imports its libraries, loads its models, reads every image and
exits (wall seconds include all of it; CPU seconds are the child's ``RUSAGE_CHILDREN``):

- ``readtext``: ``easyocr.Reader(["en"])`` on the offline weights, ``reader.readtext(path)`` with
  EasyOCR's defaults per image (:data:`benchmarks.ocr_cli.PEER`); decided here with the stage's rule
  at ``ocr.join_tokens: 0`` (the one-token rule, row ``readtext``) and, on the same readings, at the
  params' ``join_tokens`` (row ``readtext+join``, same run and time).
- ``stage:<setting>``: :func:`stages.ocr_filter.decide` with the stage's own reader (the engine's,
  :func:`gavil.models.ocr_engine.engine_from_params`) and rule (``_rule``) at the params' ``ocr``
  section with the overrides of :data:`SETTINGS` (``default``: params.yaml as it is), in rounds whose
  concepts are distinct (the stage decides one image per concept); its outputs are the ``ocr`` rows'
  statuses.

The sides take turns (``--rounds``, order rotating; in the first round ``readtext`` runs between the
first setting and the others, and a setting named twice in ``--settings`` runs twice). Reported per side: recall (word images rejected)
overall, by cap height and at >= 3 %; false rejections of text-free and of unrelated-text photos;
mean wall and CPU seconds; ratio of ``readtext``'s mean wall time to the side's.

``--peer-from results/<name>.json`` takes ``readtext``'s readings and times from an earlier result
of the same set (same ``--per-cap`` and ``--seed``: checked image by image) instead of running it
again (readtext's readings are a function of the images; its times are then that run's, under that
run's load, and the result says so).

Usage (project root, venv):  python benchmarks/ocr_truth.py [--set standard|hard] [--per-cap 6] [--seed 0] [--rounds 1]
  [--settings default easyocr-fp32 ...] [--peer-from ocr_truth] [--out ocr_truth]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402
from benchmarks._ocrset import CAP_HEIGHTS_PERCENT, HARD_CAP_HEIGHTS_PERCENT, TruthItem, write_truth_set  # noqa: E402
from benchmarks._web import describe  # noqa: E402
from benchmarks.ocr_cli import PEER, _timed  # noqa: E402

#: Stage settings: overrides of params.yaml's ``ocr`` section.
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "ppocr@1280": {"engine": "ppocr", "canvas_size": 1280},
    "ppocr-join0": {"engine": "ppocr", "join_tokens": 0},
    "easyocr-fp32": {"engine": "easyocr", "precision": "fp32", "canvas_size": 2560, "join_tokens": 0},
    "ppocr-det-full": {"engine": "ppocr", "ppocr_max_side": None},
    "ppocr-det640": {"engine": "ppocr", "ppocr_max_side": 640},
    "ppocr-det800": {"engine": "ppocr", "ppocr_max_side": 800},
    "ppocr-1thread": {"engine": "ppocr", "threads": 1},
}

STAGE = """
import hashlib, json, sys
import pandas as pd
import yaml
from gavil.params import parse_params
from gavil.models.ocr_engine import engine_from_params
from gavil.pipeline.allocator import keep_freed_memory
from stages.ocr_filter import _rule, decide
keep_freed_memory()  # what the stage's process does first (gavil.pipeline.runner)
raw = yaml.safe_load(open(sys.argv[3]))
raw["ocr"].update(json.loads(sys.argv[2]))
p = parse_params(raw).ocr
jobs = json.load(open(sys.argv[1]))
read, rule, cache, out = engine_from_params(p).read, _rule(p), {}, {}
rounds = []
for name, concept, path in jobs:  # rounds of distinct concepts: decide() keeps one image per concept
    for r in rounds:
        if concept not in r:
            r[concept] = (name, path)
            break
    else:
        rounds.append({concept: (name, path)})
for r in rounds:
    cs = sorted(r)
    images = pd.DataFrame({"concept": cs, "status": ["ok"] * len(cs), "reason": [None] * len(cs)})
    shas = {c: hashlib.sha256(open(r[c][1], "rb").read()).hexdigest() for c in cs}
    cands = pd.DataFrame([{"concept": c, "rank": 1, "url": "http://127.0.0.1/" + r[c][0], "status": "kept",
                           "sha256": shas[c], "path": r[c][1]} for c in cs])
    df = decide(images, cands, rule, p.canvas_size, cache, read, p.batch_size)
    for row in df.itertuples(index=False):
        out[r[row.concept][0]] = [row.status == "rejected_text", cache[(shas[row.concept], p.canvas_size)]]
print(json.dumps(out))
"""


def run_readtext(jobs: Path) -> tuple[float, float, dict[str, list]]:
    """``readtext`` in a new interpreter (run in the project root); (wall s, CPU s, {image name: detections})."""
    wall, cpu, out = _timed([sys.executable, "-c", PEER, str(jobs)], ROOT)
    return wall, cpu, json.loads(out.strip().splitlines()[-1])


def run_stage(jobs: Path, overrides: dict[str, Any]) -> tuple[float, float, dict[str, list]]:
    """The stage's decide() in a new interpreter; (wall s, CPU s, {image name: [rejected, detections]})."""
    cmd = [sys.executable, "-c", STAGE, str(jobs), json.dumps(overrides), str(ROOT / "params.yaml")]
    wall, cpu, out = _timed(cmd, ROOT)
    return wall, cpu, json.loads(out.strip().splitlines()[-1])


def score(
    items: Sequence[TruthItem], rejected: dict[str, bool], caps: Sequence[float] = CAP_HEIGHTS_PERCENT
) -> dict[str, Any]:
    """Recall (overall, by cap height of ``caps``, at >= 3 %) and false rejections (text-free, unrelated text)."""
    words = [it for it in items if it.shows_word]

    def rate(sel: list[TruthItem]) -> dict[str, Any]:
        hit = sum(rejected[Path(it.path).name] for it in sel)
        return {"rejected": hit, "of": len(sel), "recall": round(hit / len(sel), 3) if sel else None}

    return {
        "recall": rate(words),
        "recall_by_cap_percent": {f"{c:g}": rate([it for it in words if it.cap_height_percent == c]) for c in caps},
        "recall_cap_ge_3": rate([it for it in words if (it.cap_height_percent or 0) >= 3]),
        "false_rejections": {
            kind: sum(rejected[Path(it.path).name] for it in items if it.kind == kind) for kind in ("free", "unrelated")
        },
        "missed": [Path(it.path).name for it in words if not rejected[Path(it.path).name]],
        "wrongly_rejected": [Path(it.path).name for it in items if not it.shows_word and rejected[Path(it.path).name]],
    }


def _earlier_peer(name: str, per_cap: int, seed: int, which: str = "standard") -> tuple[float, float, dict[str, list]]:
    """``readtext``'s (wall s, CPU s, readings) from ``benchmarks/results/<name>.json``, which must
    be a result of the same set (``which``, ``per_cap``, ``seed``); raises SystemExit (one line) otherwise."""
    path = ROOT / "benchmarks" / "results" / f"{name.removesuffix('.json')}.json"
    old = json.loads(path.read_text())
    same = (old.get("set", "standard"), old.get("per_cap"), old.get("seed")) == (which, per_cap, seed)
    if not same or "readtext" not in old.get("readings", {}):
        raise SystemExit(
            f"{path}: not a result of --set {which} --per-cap {per_cap} --seed {seed} with readtext; "
            "run without --peer-from"
        )
    t = old["sides"]["readtext"]
    return float(t["wall_s_mean"]), float(t["cpu_s_mean"]), old["readings"]["readtext"]


def peer_rules(ocr: dict[str, Any]) -> dict[str, Any]:
    """The stage's match rule for ``readtext``'s readings: the one-token rule and, as ``readtext+join``,
    the params' ``join_tokens`` (``ocr``: params.yaml's ``ocr`` section)."""
    from stages.ocr_filter import MatchRule

    threshold, confidence, word_len = (
        float(ocr["match_threshold"]),
        float(ocr["min_confidence"]),
        int(ocr["min_word_len"]),
    )
    return {
        "readtext": MatchRule(threshold, confidence, word_len),
        "readtext+join": MatchRule(threshold, confidence, word_len, join_tokens=int(ocr["join_tokens"])),
    }


def side_table(
    items: Sequence[TruthItem],
    rejected: dict[str, dict[str, bool]],
    runs: list[dict[str, Any]],
    stage_sides: list[str],
    caps: Sequence[float] = CAP_HEIGHTS_PERCENT,
) -> dict[str, dict[str, Any]]:
    """Per side: :func:`score` on its decisions, mean wall and CPU seconds over its runs, and
    ``readtext``'s mean wall time over its own (both readtext rows share readtext's runs)."""

    def times(side: str, key: str) -> list[float]:
        return [x[key] for x in runs if x["side"] == ("readtext" if side.startswith("readtext") else side)]

    base = statistics.mean(times("readtext", "wall_s"))
    table = {}
    for side in ["readtext", "readtext+join", *dict.fromkeys(stage_sides)]:
        walls = times(side, "wall_s")
        table[side] = {
            **score(items, rejected[side], caps),
            "wall_s_mean": round(statistics.mean(walls), 2),
            "wall_s_runs": walls,
            "cpu_s_mean": round(statistics.mean(times(side, "cpu_s")), 2),
            "speedup_vs_readtext": round(base / statistics.mean(walls), 2),
        }
    return table


def print_table(result: dict[str, Any], table: dict[str, dict[str, Any]]) -> None:
    """The result's table on stdout: recall overall and by cap height, false rejections, wall time, ratio."""
    caps = list(next(iter(table.values()))["recall_by_cap_percent"])
    print(
        f"{len(result['items'])} images, {result['word_images']} with their word; load {result['load_average_1_5_15']}"
    )
    print(
        f"{'side':22s} {'recall':>7s} " + " ".join(f"{c + '%':>5s}" for c in caps) + "  >=3%  free unrel  wall s  ratio"
    )
    for side, t in table.items():
        by = " ".join(f"{t['recall_by_cap_percent'][c]['recall']:5.2f}" for c in caps)
        fr = t["false_rejections"]
        print(
            f"{side:22s} {t['recall']['recall']:7.3f} {by} {t['recall_cap_ge_3']['recall']:5.2f} "
            f"{fr['free']:5d} {fr['unrelated']:5d} {t['wall_s_mean']:7.1f} {t['speedup_vs_readtext']:6.2f}x"
        )


def _args() -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-cap", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--settings", nargs="*", default=["default", "ppocr@1280"], choices=sorted(SETTINGS))
    ap.add_argument("--set", dest="which", choices=("standard", "hard"), default="standard")
    ap.add_argument("--out", default=None, help="result name (default ocr_truth, or ocr_truth_hard for --set hard)")
    ap.add_argument(
        "--peer-from", default=None, help="an earlier result's name in benchmarks/results (readtext reused)"
    )
    return ap.parse_args()


def main() -> None:
    args = _args()
    hard = args.which == "hard"
    out = args.out or ("ocr_truth_hard" if hard else "ocr_truth")
    caps = HARD_CAP_HEIGHTS_PERCENT if hard else CAP_HEIGHTS_PERCENT
    peer = _earlier_peer(args.peer_from, args.per_cap, args.seed, args.which) if args.peer_from else None

    import yaml

    from stages.ocr_filter import match_text

    ocr = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rules = peer_rules(ocr)
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-truth-"))
    try:
        items = write_truth_set(work / "set", args.per_cap, args.seed, hard)
        if peer and set(peer[2]) != {Path(it.path).name for it in items}:
            raise SystemExit(f"--peer-from {args.peer_from}: its images are not this set's; run without --peer-from")
        jobs = work / "jobs.json"
        jobs.write_text(json.dumps([[Path(it.path).name, it.concept, it.path] for it in items]))
        peer_jobs = work / "peer.json"  # readtext's jobs: (key, path)
        peer_jobs.write_text(json.dumps([[Path(it.path).name, it.path] for it in items]))
        # readtext between the stage's first setting and the others, so both meet the same load; a
        # setting named twice runs twice (its times are averaged)
        stage_sides = [f"stage:{s}" for s in args.settings]
        sides = [*stage_sides[:1], "readtext", *stage_sides[1:]]
        runs: list[dict[str, Any]] = []
        readings: dict[str, dict[str, list]] = {}
        rejected: dict[str, dict[str, bool]] = {}
        concept = {Path(it.path).name: it.concept for it in items}
        for r in range(args.rounds):
            for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                if side == "readtext":
                    wall, cpu, found = peer if peer and r == 0 else run_readtext(peer_jobs)
                    readings[side] = found
                    for name, rule in rules.items():
                        rejected[name] = {
                            k: match_text(concept[k], [tuple(d) for d in v], rule).rejected for k, v in found.items()
                        }
                else:
                    wall, cpu, got = run_stage(jobs, SETTINGS[side.removeprefix("stage:")])
                    readings[side] = {k: v[1] for k, v in got.items()}
                    rejected[side] = {k: bool(v[0]) for k, v in got.items()}
                runs.append({"round": r, "side": side, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
                print(f"round {r} {side:22s} {wall:8.2f} s wall {cpu:8.2f} s CPU", flush=True)
        summary = describe([Path(it.path) for it in items])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = side_table(items, rejected, runs, stage_sides, caps)
    result = {
        "machine": machine(),
        "note": "each side a new interpreter (imports, model load, every image, exit); the sides take turns"
        + (f"; readtext's readings and times are those of results/{args.peer_from}.json (same set)" if peer else ""),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "set": args.which,
        "per_cap": args.per_cap,
        "seed": args.seed,
        "images": summary,
        "word_images": sum(it.shows_word for it in items),
        "settings": {s: SETTINGS[s] for s in dict.fromkeys(args.settings)},
        "params_ocr": ocr,
        "runs": runs,
        "sides": table,
        "items": [it.as_dict() | {"path": Path(it.path).name} for it in items],
        "readings": readings,
        "targets": {
            "recall": ">= readtext's",
            "false_rejections": "<= readtext's",
            "speedup_vs_readtext": ">= 10",
            "recall_cap_ge_3": ">= 0.9 (aim)",
        },
    }
    print_table(result, table)
    write_result(out, result)


if __name__ == "__main__":
    main()
