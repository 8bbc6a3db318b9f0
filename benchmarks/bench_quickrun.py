"""Every pipeline's quick run (``jaxkit run NAME --quick``), each in a fresh subprocess,
first with an empty persistent compilation cache (cold: everything compiles, and is
stored), then again with the cache it filled (warm: compiled programs are loaded), into
fresh output folders both times (no stage is reused). Each pipeline has its own cache
folder, so a cold run never profits from another pipeline's programs.

Wall time and the child's CPU time (user + sys) are recorded per pipeline and mode, with
the verdict line ``jaxkit run`` printed. The sum over pipelines is what a newcomer's
``jaxkit run all --quick`` costs (that runs them in one process, so it also shares
compiled programs between pipelines; this benchmark isolates each one).

    python benchmarks/bench_quickrun.py --json quickrun.json            # all, cold + warm
    python benchmarks/bench_quickrun.py --only tempbench,amgenc --quick # cold only
    python benchmarks/bench_quickrun.py --dry-run                       # the commands
    python benchmarks/bench_quickrun.py --all-jobs 1,2 --json all.json  # the one command

``--all-jobs N,M`` times instead the newcomer's one command, ``jaxkit run all --quick
--jobs N`` (cold cache, in one process or N workers: jaxkit/jobs.py), once per value, and
checks that every value printed the same verdict line for every pipeline.

(``jaxkit bench quickrun`` runs it too.) Under load the CPU column is the fairer number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("cold", "warm")


def pipelines(root: Path = ROOT) -> list[str]:
    """The registered pipeline names, read from ``jaxkit/*/pipeline.py`` without
    importing them (importing all pipelines takes seconds)."""
    names = []
    for p in sorted((root / "jaxkit").glob("*/pipeline.py")):
        names += re.findall(r'@register\(\s*"([^"]+)"', p.read_text())
    return sorted(names)


def command(name: str, out: Path) -> list[str]:
    """The child command of one quick run of pipeline ``name`` into ``out``."""
    return [sys.executable, "-m", "jaxkit.cli", "run", name, "--quick", "--out", str(out),
            "--fresh", "--force"]


def child_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, JAXKIT_COMPILE_CACHE_DIR=str(cache), JAXKIT_PROGRESS="plain",
               JAXKIT_PROGRESS_EVERY="30", COLUMNS="200")
    env.pop("JAXKIT_NO_COMPILE_CACHE", None)
    return env


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str], cache: Path, log: Path, timeout: float) -> dict:
    """Run ``cmd`` with the compilation cache ``cache``, its output to ``log``:
    ``{wall_s, cpu_s, rc, log}`` (``rc`` "timeout" past ``timeout`` seconds)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    c0, t0 = _cpu_children(), time.perf_counter()
    try:
        with log.open("w") as fh:
            rc = subprocess.run(cmd, env=child_env(cache), stdout=fh, stderr=subprocess.STDOUT,
                                timeout=timeout, cwd=ROOT).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "rc": rc, "log": str(log)}


def run_one(name: str, out: Path, cache: Path, timeout: float) -> dict:
    """One quick run in a subprocess: ``{wall_s, cpu_s, rc, verdicts, log}``."""
    r = _timed(command(name, out), cache, out.parent / f"{out.name}.log", timeout)
    text = Path(r["log"]).read_text(errors="replace")
    m = re.search(rf"\] {re.escape(name)}\s+[\d.]+s\s+(.+)$", text, re.M)
    return dict(r, verdicts=m.group(1).strip() if m else None)


def all_command(jobs: int, out: Path) -> list[str]:
    """The child command of ``jaxkit run all --quick --jobs JOBS`` into ``out``."""
    return [sys.executable, "-m", "jaxkit.cli", "run", "all", "--quick", "--jobs", str(jobs),
            "--out", str(out), "--fresh", "--force"]


def verdict_lines(text: str) -> dict[str, str]:
    """``{pipeline: verdicts}`` from the ``[ i/N] NAME  SECONDSs  VERDICTS`` lines of a
    ``run all`` log (FAILED lines give ``"FAILED"``)."""
    out = {}
    for m in re.finditer(r"^\[\s*\d+/\d+\] (\S+)\s+(?:[\d.]+s\s+(.+)|.*FAILED.*)$", text,
                         re.M):
        out[m.group(1)] = (m.group(2) or "FAILED").strip()
    return out


def run_all(jobs: int, work: Path, timeout: float) -> dict:
    """``jaxkit run all --quick --jobs JOBS`` once, cold (its own empty cache):
    ``{wall_s, cpu_s, rc, verdicts: {pipeline: line}, log}``."""
    r = _timed(all_command(jobs, work / f"all-jobs{jobs}"), work / f"xla-cache-all-jobs{jobs}",
               work / f"all-jobs{jobs}.log", timeout)
    return dict(r, verdicts=verdict_lines(Path(r["log"]).read_text(errors="replace")))


def table(results: dict[str, dict], modes) -> str:
    """The Markdown table: one row per pipeline, wall and CPU per mode, then the total."""
    head = ["pipeline"] + [f"{m} {k}" for m in modes for k in ("wall s", "CPU s")] + ["verdicts"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    tot = {(m, k): 0.0 for m in modes for k in ("wall_s", "cpu_s")}
    for name, res in results.items():
        cells = [name]
        for m in modes:
            r = res.get(m, {})
            ok = r.get("rc") == 0
            for k in ("wall_s", "cpu_s"):
                v = r.get(k)
                cells.append("n/a" if v is None else f"{v:.1f}" + ("" if ok else f" ({r['rc']})"))
                tot[(m, k)] += v or 0.0
        last = res.get(modes[-1], {})
        cells.append(last.get("verdicts") or "")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(f"{tot[(m, k)]:.1f}" for m in modes
                                             for k in ("wall_s", "cpu_s")) + " | |")
    return "\n".join(lines)


def busy(load: dict[str, float], cores: int) -> bool:
    """Whether the one-minute load average at the start or the end of the run was above
    ``cores`` (one run's children keep it at most about 1-2 on a quiet machine)."""
    return max(load.values()) > cores


def main(argv: list[str] | None = None) -> int:
    names = pipelines()
    p = argparse.ArgumentParser(prog="bench_quickrun", description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="write all numbers + environment here")
    p.add_argument("--quick", action="store_true", help="cold cache only (no warm rerun)")
    p.add_argument("--only", default=",".join(names),
                   help=f"comma-separated pipelines out of {','.join(names)}")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    p.add_argument("--work", metavar="DIR", help="output and cache folder (default: a "
                                                 "temporary one)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands and write the JSON plan, run nothing")
    p.add_argument("--all-jobs", metavar="N,M", help="time `jaxkit run all --quick --jobs "
                   "N` (cold) once per value instead of each pipeline alone")
    args = p.parse_args(argv)
    chosen = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = sorted(set(chosen) - set(names))
    if bad:
        p.error(f"unknown pipeline(s) {bad}; choose from {names}")
    if args.json and Path(args.json).is_dir():
        p.error(f"--json {args.json}: is a folder; give a file name")
    if args.timeout <= 0:
        p.error("--timeout must be > 0")
    try:
        all_jobs = [int(j) for j in args.all_jobs.split(",")] if args.all_jobs else []
    except ValueError:
        p.error(f"--all-jobs must be comma-separated integers; got {args.all_jobs!r}")
    if any(j < 1 for j in all_jobs):
        p.error(f"--all-jobs values must be >= 1; got {args.all_jobs!r}")
    modes = MODES[:1] if args.quick else MODES
    work = Path(args.work) if args.work else (
        Path(tempfile.gettempdir()) / "jaxkit-quickrun-DIR" if args.dry_run
        else Path(tempfile.mkdtemp(prefix="jaxkit-quickrun-")))
    cache = work / "xla-cache"
    if args.dry_run and all_jobs:
        for j in all_jobs:
            print(" ".join(all_command(j, work / f"all-jobs{j}")))
        return 0
    if all_jobs:
        return main_all(all_jobs, work, args)
    if args.dry_run:
        plan = {n: {m: command(n, work / m / n) for m in modes} for n in chosen}
        for n in chosen:
            for m in modes:
                print(f"{m}: {' '.join(plan[n][m])}")
        if args.json:
            Path(args.json).write_text(json.dumps({"dry_run": True, "modes": list(modes),
                                                   "cache": str(cache), "plan": plan},
                                                  indent=2) + "\n")
        return 0
    if cache.exists() and any(cache.glob("*/*")):
        p.error(f"--work {work}: its xla-cache is not empty (a cold run needs an empty one)")
    t0 = time.perf_counter()
    load = {"start": os.getloadavg()[0]}
    results: dict[str, dict] = {}
    for n in chosen:
        results[n] = {}
        for m in modes:
            r = run_one(n, work / m / n, cache / n, args.timeout)
            results[n][m] = r
            print(f"{n:<22} {m}: {r['wall_s']:7.1f}s wall {r['cpu_s']:7.1f}s CPU rc={r['rc']}"
                  f"  {r['verdicts'] or ''}", flush=True)
    md = table(results, modes)
    print(md)
    wall = time.perf_counter() - t0
    load["end"] = os.getloadavg()[0]
    print(f"wall {wall:.0f} s; load average {load['start']:.2f} at the start, "
          f"{load['end']:.2f} at the end")
    if busy(load, os.cpu_count() or 1):
        print("warning: the load average was above the core count: another job shared the "
              "machine, so read the CPU column, not wall time", file=sys.stderr)
    if args.json:
        from jaxkit import bench

        env = bench.environment(peers=(), roofline=False)
        bench.write_json(args.json, {"environment": env, "modes": list(modes),
                                     "results": results, "table_markdown": md,
                                     "wall_s": wall, "load_average": load})
        print(f"wrote {args.json}")
    return 0 if all(r.get("rc") == 0 for res in results.values() for r in res.values()) else 1


def main_all(all_jobs: list[int], work: Path, args) -> int:
    """``--all-jobs``: the one command per value, its table, the verdicts compared."""
    load = {"start": os.getloadavg()[0]}
    runs = {}
    for j in all_jobs:
        runs[j] = r = run_all(j, work, args.timeout * len(pipelines()))
        print(f"run all --quick --jobs {j}: {r['wall_s']:.1f}s wall {r['cpu_s']:.1f}s CPU "
              f"rc={r['rc']}", flush=True)
    load["end"] = os.getloadavg()[0]
    base = runs[all_jobs[0]]
    lines = ["| `--jobs` | wall s | CPU s | rc | wall / first |", "|---|---|---|---|---|"]
    lines += [f"| {j} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rc']} | "
              f"{r['wall_s'] / base['wall_s']:.2f} |" for j, r in runs.items()]
    md = "\n".join(lines)
    differ = sorted({n for r in runs.values() for n in r["verdicts"]
                     if r["verdicts"].get(n) != base["verdicts"].get(n)})
    print(md)
    print("verdict lines: " + ("identical for every pipeline" if not differ
                               else "differ for " + ", ".join(differ)))
    if load["start"] > (os.cpu_count() or 1):  # at the end, N workers are load enough
        print("warning: the load average was above the core count at the start: another "
              "job shared the machine", file=sys.stderr)
    if args.json:
        from jaxkit import bench

        env = bench.environment(peers=(), roofline=False)
        bench.write_json(args.json, {"environment": env, "all_jobs": runs,
                                     "verdicts_differ": differ, "table_markdown": md,
                                     "load_average": load})
        print(f"wrote {args.json}")
    return 0 if not differ and all(r["rc"] == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
