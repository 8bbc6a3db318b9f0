#!/usr/bin/env bash
# benchmarks/gpu_check.sh: the accelerator check, in one command, within 10 minutes.
#
# On a machine with a GPU it runs, in this order and within a time budget (default 570 s):
#   1. jaxkit info and nvidia-smi (the machine);
#   2. every family's benchmark (benchmarks/bench_*.py) at accelerator sizes, bfloat16
#      where it pays (the compose step also in bfloat16), each by its command line with
#      only the flags its --help lists;
#   3. the twelve quick pipelines (jaxkit run all --quick, one line per pipeline);
#   4. the multi-device tests (8 simulated devices, as in CI).
# and writes OUT/gpu_check.json (every step, its command, status, seconds, the
# benchmarks' own JSON) and OUT/gpu_check.md (one table, then each benchmark's table).
# Each section has its share of the budget (info 30, benchmarks 270, pipelines 180,
# tests 90 of 570 s, scaled by --budget); a step runs with at most what its section has
# left (then it is cut and marked timeout), and is skipped when under 5 s are left.
#
#   benchmarks/gpu_check.sh                    # on the GPU machine (OUT=gpu-check/)
#   benchmarks/gpu_check.sh --tiny             # on a CPU, in seconds: each benchmark
#                                              # compiled and its GPU flags checked, one
#                                              # benchmark --quick, the pipelines'
#                                              # configs, the tests collected
#   benchmarks/gpu_check.sh --plan             # print the steps, write the files, run none
#   options: --out DIR, --budget SECONDS, --only info,bench,pipelines,tests
#
# Record the Markdown table in benchmarks/RESULTS.md after a GPU run.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
cd "$ROOT"
exec "$PY" - "$@" <<'PYTHON'
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path.cwd()
SECTIONS = ("info", "bench", "pipelines", "tests")
# accelerator sizes per benchmark (flags each script's --help must list; others dropped)
GPU_ARGS = {
    "bandit": ["--dtypes", "float32"],
    "belief": [],
    "causal_audit": ["--batch", "1024"],
    "causaltab": [],
    "charge": ["--batch", "4096"],
    "compose": ["--dtype", "float32"],
    "compose-bf16": ["--dtype", "bfloat16"],
    "crosscoder": ["--batch", "8192", "--no-peers"],
    "flow": ["--batches", "1024,8192"],
    "ica": [],
    # jaxkit.lm prefill / decode / capture at accelerator batch sizes, both weight dtypes
    # (the peers are CPU-only here); prints the batch-1 bandwidth bound of the weights run
    "lm": ["--no-peers", "--batches", "1,8,32,128", "--dtypes", "float32,bfloat16",
           "--prefill-tokens", "2048"],
    "misaligned": [],
    "universal_circuits": ["--no-peers"],
}
NOT_FAMILIES = {"bench_quickrun"}  # the pipelines step covers it
TINY_BENCH = "belief"  # the one benchmark the tiny mode runs (--quick)
# each section's share of the budget (seconds of the default 570) and one step's limit
SHARE = {"info": 30, "bench": 270, "pipelines": 180, "tests": 90}
STEP_MAX = {"info": 30, "bench": 90, "pipelines": 180, "tests": 90}
MULTI_DEVICE_TESTS = ["tests/jaxkit/test_distributed.py"]


def parse(argv):
    p = argparse.ArgumentParser(prog="gpu_check.sh", description="jaxkit accelerator check")
    p.add_argument("--tiny", action="store_true", help="CPU smoke sizes (seconds)")
    p.add_argument("--plan", action="store_true", help="write the plan, run nothing")
    p.add_argument("--out", default="gpu-check", help="output folder (default gpu-check/)")
    p.add_argument("--budget", type=float, default=570.0,
                   help="seconds for all steps (default 570)")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma list out of {','.join(SECTIONS)}")
    a = p.parse_args(argv)
    a.sections = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = sorted(set(a.sections) - set(SECTIONS))
    if bad or not a.sections:
        p.error(f"--only: unknown section(s) {bad}; choose from {list(SECTIONS)}")
    if a.budget <= 0:
        p.error(f"--budget must be > 0 seconds; got {a.budget:g}")
    return a


def script_flags(path: Path) -> set[str]:
    """The long options a benchmark script defines (its source, without running it),
    plus those every script gets from jaxkit.bench.benchmark_parser."""
    text = path.read_text()
    flags = set(re.findall(r"""["'](--[a-z][a-z0-9-]*)["']""", text))
    if "benchmark_parser" in text:
        flags |= {"--json", "--quick", "--only", "--isa"}
        if "peers_help" in text:
            flags.add("--no-peers")
    return flags


def keep_known(args: list[str], flags: set[str]) -> tuple[list[str], list[str]]:
    """``args`` without the options (and their values) the script does not define."""
    kept, dropped, i = [], [], 0
    while i < len(args):
        a = args[i]
        takes_value = i + 1 < len(args) and not args[i + 1].startswith("--")
        if a.startswith("--") and a not in flags:
            dropped.append(a)
            i += 2 if takes_value else 1
            continue
        kept.append(a)
        if takes_value:
            kept.append(args[i + 1])
            i += 1
        i += 1
    return kept, dropped


def steps(a, out: Path) -> list[dict]:
    py = sys.executable
    s = []
    if "info" in a.sections:
        s.append(dict(name="jaxkit info", kind="info", cmd=[py, "-m", "jaxkit.cli", "info"]))
        if shutil.which("nvidia-smi"):
            s.append(dict(name="nvidia-smi", kind="info", cmd=["nvidia-smi"]))
    if "bench" in a.sections:
        found = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob(
            "bench_*.py") if p.stem not in NOT_FAMILIES)
        plan = dict(GPU_ARGS)
        plan.update({f: [] for f in found if f not in plan})  # a new family: its defaults
        for name, extra in sorted(plan.items()):
            fam = name.split("-")[0]
            path = ROOT / "benchmarks" / f"bench_{fam}.py"
            if not path.is_file():
                s.append(dict(name=f"bench {name}", kind="bench", cmd=[], status="missing",
                              note=f"{path.name} not found"))
                continue
            flags = script_flags(path)
            js = out / f"bench_{name}.json"
            kept, dropped = keep_known(extra, flags)
            if a.tiny:
                if name == TINY_BENCH:
                    cmd = [py, str(path), "--quick", "--json", str(js)]
                else:  # compiles, and its GPU flags were checked against its source
                    cmd = [py, "-m", "py_compile", str(path)]
                    js = None
                note = f"GPU flags not defined: {', '.join(dropped)}" if dropped else ""
            else:
                cmd = [py, str(path), *kept] + (["--json", str(js)] if "--json" in flags
                                                 else [])
                note = f"dropped {', '.join(dropped)} (not in {path.name})" if dropped else ""
            s.append(dict(name=f"bench {name}", kind="bench", cmd=cmd, json=str(js) if js
                          else None, note=note, gpu_args=extra))
    if "pipelines" in a.sections:
        runs = out / "runs"
        cmd = [py, "-m", "jaxkit.cli", "run", "all", "--quick", "--out", str(runs), "--force"]
        s.append(dict(name="quick pipelines", kind="pipelines",
                      cmd=cmd + (["--show-config"] if a.tiny else [])))
    if "tests" in a.sections:
        cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MULTI_DEVICE_TESTS]
        s.append(dict(name="multi-device tests", kind="tests",
                      cmd=cmd + (["--collect-only"] if a.tiny else [])))
    for st in s:
        st.setdefault("status", "planned")
        st["tiny"] = a.tiny  # a CPU: one step may take up to 3x the accelerator limit
    return s


PIPE_LINE = re.compile(r"^\[\s*\d+/\d+\]\s+(\S+)\s+(?:([\d.]+)s\s+(.*)|FAILED.*)$")


def summarise(st: dict, text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if st["kind"] == "info":
        keep = [" ".join(ln.replace("│", " ").split()) for ln in lines
                if re.search(r"devices|backend|GPU|MiB", ln)]
        if keep:
            return "; ".join(keep[:3])[:160]
    if st["kind"] == "pipelines":
        st["pipelines"] = {}
        for ln in lines:
            m = PIPE_LINE.match(ln.strip())
            if m:
                st["pipelines"][m.group(1)] = dict(
                    wall_s=float(m.group(2)) if m.group(2) else None,
                    verdicts=m.group(3) if m.group(3) else "FAILED")
        if st["pipelines"]:
            return f"{len(st['pipelines'])} pipelines"
    if st["kind"] == "tests":
        for ln in reversed(lines):
            if re.search(r"\b(passed|failed|error|tests? collected)\b", ln):
                return ln.strip("= ")
    return lines[-1][:160] if lines else ""


def run_step(st: dict, log: Path, left: float) -> None:
    """Run one step with at most ``left`` seconds (its section's remaining share)."""
    if st["status"] != "planned":
        return
    st["timeout"] = round(min(STEP_MAX[st["kind"]] * (3 if st.get("tiny") else 1), left), 1)
    if st["timeout"] < 5:
        st["status"], st["note"] = "skipped", (st.get("note", "") + " budget spent").strip()
        return
    env = dict(os.environ, JAXKIT_PROGRESS="plain", JAXKIT_PROGRESS_EVERY="30",
               COLUMNS="200")
    t0 = time.perf_counter()
    try:
        with log.open("w") as fh:
            rc = subprocess.run(st["cmd"], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                timeout=st["timeout"], cwd=ROOT).returncode
        st["status"] = "ok" if rc == 0 else f"failed (rc {rc})"
    except subprocess.TimeoutExpired:
        st["status"] = f"timeout ({st['timeout']} s)"
    st["seconds"] = round(time.perf_counter() - t0, 1)
    st["log"] = str(log)
    text = log.read_text(errors="replace")
    st["summary"] = summarise(st, text)
    if st.get("json") and Path(st["json"]).is_file():
        try:
            st["result"] = json.loads(Path(st["json"]).read_text())
        except ValueError:
            st["note"] = (st.get("note", "") + " unreadable JSON").strip()


def cell(v) -> str:
    return str(v if v is not None else "").replace("|", "\\|").replace("\n", " ")


def markdown(meta: dict, s: list[dict]) -> str:
    out = [f"# jaxkit gpu_check ({meta['mode']})", "",
           f"- date: {meta['date_utc']}; total {meta.get('wall_s', 0):.0f} s of a "
           f"{meta['budget_s']:.0f} s budget", f"- machine: {meta['machine']}", "",
           "| step | status | seconds | summary | note |", "|---|---|---|---|---|"]
    for st in s:
        out.append("| " + " | ".join(cell(x) for x in (
            st["name"], st["status"], st.get("seconds", ""), st.get("summary", ""),
            st.get("note", ""))) + " |")
    for st in s:
        if st.get("pipelines"):
            out += ["", "## quick pipelines", "", "| pipeline | wall s | verdicts |",
                    "|---|---|---|"]
            out += [f"| {n} | {cell(r['wall_s'])} | {cell(r['verdicts'])} |"
                    for n, r in st["pipelines"].items()]
    for st in s:
        tab = (st.get("result") or {}).get("table_markdown")
        if tab:
            out += ["", f"## {st['name']}", "", f"`{' '.join(st['cmd'][1:])}`", "", tab]
    return "\n".join(out) + "\n"


def machine() -> str:
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=20)
            if r.returncode == 0 and r.stdout.strip():
                return "GPU " + "; ".join(r.stdout.strip().splitlines())
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"no GPU found; {os.cpu_count()} CPUs"


def write(out: Path, meta: dict, s: list[dict]) -> None:
    body = dict(meta, steps=s)
    for name, text in (("gpu_check.json", json.dumps(body, indent=2, default=str) + "\n"),
                       ("gpu_check.md", markdown(meta, s))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, out / name)  # atomic: a reader never sees half a file


def main(argv) -> int:
    a = parse(argv)
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        print(f"gpu_check.sh: error: --out {out}: is a file, not a folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    s = steps(a, out)
    meta = dict(mode="plan" if a.plan else "tiny" if a.tiny else "accelerator",
                date_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                budget_s=a.budget, machine=machine(), python=sys.version.split()[0])
    t0 = time.perf_counter()
    scale = a.budget / sum(SHARE.values())
    left = {k: v * scale for k, v in SHARE.items()}
    for i, st in enumerate(s):
        if a.plan:
            print(f"{st['name']}: {' '.join(st['cmd']) or st.get('note', '')}")
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", st["name"].lower()).strip("-")
        t1 = time.perf_counter()
        run_step(st, out / "logs" / f"{i:02d}-{slug}.log",
                 min(left[st["kind"]], a.budget - (t1 - t0)))
        left[st["kind"]] -= time.perf_counter() - t1
        print(f"{st['name']:<28} {st['status']:<16} {st.get('seconds', '')!s:>7}  "
              f"{st.get('summary', '')[:90]}", flush=True)
        meta["wall_s"] = time.perf_counter() - t0
        write(out, meta, s)  # after each step: a cut-off run keeps what finished
    meta["wall_s"] = time.perf_counter() - t0
    write(out, meta, s)
    print(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    bad = [st["name"] for st in s if st["status"] not in ("ok", "planned")]
    if bad:
        print(f"not ok: {', '.join(bad)}")
    return 1 if bad else 0


sys.exit(main(sys.argv[1:]))
PYTHON
