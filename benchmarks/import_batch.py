"""Import a 100,000-row raw batch (25,000 creations in 12,500 two-cue tasks + 75,000 solves,
with 1 % faulty rows) and select it; compare with a same-run baseline that only parses the same
files (csv.DictReader + json.loads). Target: import under 30 s.

Usage: python benchmarks/import_batch.py   -> prints a table, writes benchmarks/results/import_batch.json
"""

from __future__ import annotations

import csv
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import letters, machine, write_result  # noqa: E402

WORDS = [f"w{i:04d}" for i in range(3000)]


def make_batch(d: Path, tasks: int = 12_500, seed: int = 0) -> int:
    rng = random.Random(seed)
    d.mkdir(parents=True)
    rows = 0
    with open(d / "creations.csv", "w", newline="") as fc, open(d / "solves.csv", "w", newline="") as fs:
        c, s = csv.writer(fc), csv.writer(fs)
        c.writerow(["instance_id", "task_id", "spymaster_id", "cue", "candidates", "associations", "score_fool_the_ai"])
        s.writerow(["instance_id", "solver_id", "selection"])
        for t in range(tasks):
            n = rng.choice([5, 6, 10, 12])
            cands = rng.sample(WORDS, n)
            for k_i in (1, 2):
                k = rng.randint(2, 3)
                assoc = rng.sample(cands, k)
                iid = f"t{t}-{k_i}"
                cue = f"cue{letters(t)}x{letters(k_i)}" if rng.random() > 0.01 else "two words"  # 1 % invalid cues
                c.writerow(
                    [
                        iid,
                        f"t{t}",
                        f"spy{t % 300}",
                        cue,
                        json.dumps(cands),
                        json.dumps(assoc),
                        rng.choice([0, 50, 67, 100]),
                    ]
                )
                rows += 1
                for solver in range(3):
                    sel = assoc if rng.random() < 0.8 else rng.sample(cands, k)
                    s.writerow([iid, f"solver{rng.randrange(500)}-{solver}", json.dumps(sel)])
                    rows += 1
    return rows


def main() -> None:
    from stages.import_annotations import import_all
    from stages.select_instances import select

    work = Path(tempfile.mkdtemp(prefix="gavil-import-"))
    rows = make_batch(work / "raw" / "batch-0001")

    t0 = time.perf_counter()
    for name in ("creations.csv", "solves.csv"):
        with open(work / "raw/batch-0001" / name, newline="") as f:
            for rec in csv.DictReader(f):
                for v in rec.values():
                    if v.startswith("["):
                        json.loads(v)
    t_parse = time.perf_counter() - t0

    t0 = time.perf_counter()
    res = import_all(None, [], work / "raw", b"bench-key")
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    sel = select(res.instances, res.solves, 0.8)
    t_select = time.perf_counter() - t0

    result = {
        "machine": machine(),
        "rows": rows,
        "instances": len(res.instances),
        "solves": len(res.solves),
        "rejected": len(res.rejects),
        "selected": int((sel["status"] == "selected").sum()),
        "parse_only_s": round(t_parse, 2),
        "import_s": round(t_import, 2),
        "select_s": round(t_select, 2),
        "import_vs_parse_ratio": round(t_import / t_parse, 2),
        "target_import_s": 30,
    }
    print(f"{'rows':>8s} {'parse-only s':>13s} {'import s':>9s} {'ratio':>6s} {'select s':>9s} {'rejected':>9s}")
    print(f"{rows:8d} {t_parse:13.2f} {t_import:9.2f} {t_import / t_parse:6.2f} {t_select:9.2f} {len(res.rejects):9d}")
    write_result("import_batch", result)


if __name__ == "__main__":
    main()
