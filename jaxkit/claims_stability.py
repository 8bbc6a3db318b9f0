"""How stable a pipeline's verdicts are: the quick configuration rerun over seeds.

The unit of replication is what a user would redo: the whole run with another base seed
(every training, simulator and model seed of the pipeline derives from it), optionally
under a smaller instruction set (``--isa avx2``: XLA's ``--xla_cpu_max_isa``, which changes
float rounding). :func:`stability` runs ``jaxkit run NAME --quick --seed S`` once per seed,
each in a fresh process with its own output folder, reads each run's claims from its
``metrics.json`` and reports, per claim, the verdicts and how often the most common one
came out (its *agreement*). A verdict whose agreement is below 1 flips across seeds: the
note of a full run should give the distribution, not one draw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .claims import Claim
from .io import atomic_write
from .report import markdown_table

__all__ = ["stability", "stability_rows", "stability_markdown"]

_SHORT = {"yes": "Y", "no": "N", "not shown": "?", "not tested at this size": "-",
          "not tested": "-"}


def _claims_of(run_dir: Path) -> list[Claim]:
    m = json.loads((run_dir / "metrics.json").read_text())
    return [Claim.from_dict(c) for c in m.get("claims", [])]


def _keyed(claims: Sequence[Claim]) -> list[tuple[str, Claim]]:
    """Claims keyed by their text (and occurrence, when a text repeats)."""
    seen: Counter = Counter()
    out = []
    for c in claims:
        seen[c.claim] += 1
        out.append((c.claim if seen[c.claim] == 1 else f"{c.claim} #{seen[c.claim]}", c))
    return out


def stability_rows(runs: dict[int, Sequence[Claim]]) -> list[dict[str, Any]]:
    """Per claim: its kind, the verdict of each seed (None when a run lacks the claim),
    the most common verdict and the share of seeds that gave it.

    Args:
      runs: ``{seed: claims}`` of the runs that finished.

    Returns:
      One dict per claim (``claim``, ``kind``, ``verdicts``: ``{seed: verdict}``,
      ``mode``, ``agreement``), in the order of the first run that has it.
    """
    order: list[str] = []
    kinds: dict[str, str] = {}
    table: dict[str, dict[int, str]] = {}
    for seed, claims in runs.items():
        for key, c in _keyed(claims):
            if key not in table:
                order.append(key)
                table[key] = {}
                kinds[key] = c.kind
            table[key][seed] = c.verdict
    rows = []
    for key in order:
        verdicts = {s: table[key].get(s) for s in runs}
        counts = Counter(v for v in verdicts.values() if v is not None)
        mode, n = counts.most_common(1)[0]
        rows.append({"claim": key, "kind": kinds[key], "verdicts": verdicts, "mode": mode,
                     "agreement": n / len(runs)})
    return rows


def stability_markdown(name: str, rows: list[dict[str, Any]], seeds: Sequence[int],
                       isa: str | None = None) -> str:
    """The stability table of one pipeline (paper claims first)."""
    head = (f"Verdict stability of `{name}` (quick configuration, seeds "
            f"{', '.join(map(str, seeds))}" + (f", --isa {isa}" if isa else "") + "): "
            "Y yes, N no, ? not shown, - not tested, . missing.")
    body = []
    for r in sorted(rows, key=lambda r: r["kind"] != "paper"):
        v = " ".join(_SHORT.get(r["verdicts"][s], ".") if r["verdicts"][s] else "."
                     for s in seeds)
        body.append([r["claim"], r["kind"], v, r["mode"], f"{r['agreement']:.2f}"])
    flips = sum(1 for r in rows if r["kind"] == "paper" and r["agreement"] < 1)
    n_paper = sum(1 for r in rows if r["kind"] == "paper")
    tail = f"{flips} of {n_paper} paper claims flip across these seeds."
    return "\n".join([head, "", markdown_table(("claim", "kind", "per seed", "most common",
                                                "agreement"), body), "", tail])


def stability(name: str, seeds: Sequence[int], out_root: str | os.PathLike, *,
              isa: str | None = None, sets: Sequence[str] = (),
              timeout: float | None = None) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Run the quick configuration of pipeline ``name`` once per seed and compare verdicts.

    Args:
      name: a registered pipeline.
      seeds: the base seeds (at least 2).
      out_root: each run goes to ``out_root/seed-S``; the table to
        ``out_root/stability.md`` and ``stability.json`` (atomically).
      isa: ``"avx2"`` or ``"avx512"``: run under that instruction-set limit.
      sets: ``field=value`` overrides for every run.
      timeout: seconds per run (None: no limit).

    Returns:
      ``(rows, failed)``: :func:`stability_rows` of the runs that finished, and the last
      error line of each seed whose run failed.
    """
    from . import registry
    from .machine import ISA_LIMITS, isa_env

    if name not in registry.names():
        raise ValueError(f"no pipeline named {name!r} (jaxkit list names them)")
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be at least 2 distinct integers, got {seeds}")
    if isa is not None and isa not in ISA_LIMITS:
        raise ValueError(f"isa must be one of {sorted(ISA_LIMITS)}, got {isa!r}")
    out_root = Path(out_root)
    env = dict(os.environ)
    if isa is not None:
        env.update(isa_env(isa, env.get("XLA_FLAGS", "")))
    runs: dict[int, list[Claim]] = {}
    failed: dict[int, str] = {}
    for s in seeds:
        out = out_root / f"seed-{s}"
        cmd = [sys.executable, "-m", "jaxkit", "run", name, "--quick", "--seed", str(s),
               "--out", str(out), "--force"]
        for kv in sets:
            cmd += ["--set", kv]
        print(f"[stability] {name} seed {s}: {' '.join(cmd[2:])}", flush=True)
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            failed[s] = f"timed out after {timeout:g} s"
            continue
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "stability-run.log", proc.stdout + proc.stderr)
        if proc.returncode != 0 or not (out / "metrics.json").exists():
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            failed[s] = lines[-1].strip() if lines else f"exit {proc.returncode}"
            continue
        runs[s] = _claims_of(out)
    rows = stability_rows(runs) if runs else []
    done = [s for s in seeds if s in runs]
    md = stability_markdown(name, rows, done, isa) if rows else "No run finished."
    if failed:
        md += "\n\nFailed runs: " + "; ".join(f"seed {s}: {e}" for s, e in failed.items())
    atomic_write(out_root / "stability.md", md + "\n")
    atomic_write(out_root / "stability.json", json.dumps(
        {"pipeline": name, "seeds": seeds, "isa": isa, "rows": rows,
         "failed": {str(k): v for k, v in failed.items()}}, indent=2) + "\n")
    return rows, failed
