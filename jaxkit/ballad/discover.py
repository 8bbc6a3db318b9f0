"""LLM-driven discovery of Python-source online bin-packing heuristics (``jaxkit ballad
discover``).

:func:`discover` runs ONE :func:`jaxkit.ballad.search.search` run (one router, one seed)
with :func:`~jaxkit.ballad.search.source_evaluator`, starting from best fit (or, with
``resume=True``, from the saved population), and keeps ``out_dir`` up to date:

* ``population.json``: every genealogy node (id, parents, model name, step, score,
  excess, ok, error, cost, source), the problem fingerprint and one entry per run segment;
* ``best.py``: the source of the best heuristic so far;
* ``report.md``: a short summary.

All three are rewritten atomically (:func:`jaxkit.io.atomic_write`) after the initial
evaluation and after EVERY step, so a killed run loses at most the call in flight.

The files are written from ``search()``'s genealogy through its ``on_step`` hook, which
runs after the initial evaluation and after every call.

Failures never stop the loop: HTTP errors, timeouts and replies without parsable code
(:class:`~jaxkit.ballad.llm.LLMError`; any other exception a proposer raises is recorded
the same way) and sandbox failures (crash, timeout, bad output) become failed nodes with
their reason and cost (a reply without parsable code still costs its tokens; an HTTP
error costs nothing).

A fresh run refuses an ``out_dir`` that already holds ``population.json`` (no silent
overwrite); pass ``resume=True`` to continue it.

Resume (``resume=True``): the saved nodes are kept unchanged; the best distinct-score
successful nodes (at most ``n_islands * island_size``) are re-evaluated as the initial
population of a new ``search()`` segment and new nodes are appended with global ids,
parents and steps. The bandit state is NOT replayed: it restarts, seeded with the
re-evaluated nodes as roots (Ballad) or empty (UCB1), and the segment's search seed is
``seed + segment`` so parent draws do not repeat the first segment's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxkit.io import atomic_write

from . import search as _search
from .llm import Candidate
from .search import Router, source_evaluator, standard_routers

__all__ = [
    "BEST_FIT_SOURCE",
    "FORMAT",
    "ROUTERS",
    "discover",
    "load_population",
    "make_router",
    "weibull_items",
]

FORMAT = "jaxkit.ballad.discover/1"
ROUTERS = ("ballad", "ucb1", "uniform")

BEST_FIT_SOURCE = '''import numpy as np


def priority(item: float, bins: np.ndarray) -> np.ndarray:
    """Best fit: prefer the bin left with the least room."""
    return -(bins - item)
'''

N_ISLANDS, ISLAND_SIZE = 2, 6


def weibull_items(seed: int, n_instances: int, n_items: int) -> np.ndarray:
    """Weibull(k=3, scale 45) item sizes in [1, 100] (FunSearch's Weibull suite, capacity
    100) from :mod:`jaxkit.ballad.problems`' generator; shape ``(n_instances, n_items)``."""
    import jax

    from . import problems

    if n_instances < 1 or n_items < 2:
        raise ValueError(f"need >= 1 instance of >= 2 items; got {n_instances} x {n_items}")
    inst = problems.make("binpacking_weibull", n_items).generate(jax.random.key(seed),
                                                                  n_instances)
    return np.asarray(inst["items"], np.float64)


def make_router(router: str | Router, names: Sequence[str], capacity: int) -> Router:
    """``ballad``, ``ucb1``, ``uniform`` or a model name (always that model), built as
    :func:`~jaxkit.ballad.search.standard_routers` does with ``capacity`` genealogy nodes."""
    if isinstance(router, Router):
        return router
    routers = {r.name: r for r in standard_routers(len(names), capacity, names)}
    if router in ROUTERS:
        return routers[router]
    if router in names:
        return routers[f"only {router}"]
    raise ValueError(f"unknown router {router!r}; choose one of {', '.join(ROUTERS)} "
                     f"or a model name ({', '.join(names)})")


def _fingerprint(items: np.ndarray, capacity: float) -> dict:
    return {"name": "online bin packing", "capacity": float(capacity),
            "n_instances": int(items.shape[0]), "n_items": int(items.shape[1]),
            "items_sha256": hashlib.sha256(np.ascontiguousarray(items).tobytes()).hexdigest()}


def load_population(out_dir: str | Path) -> dict:
    """The saved ``population.json`` of ``out_dir`` (ValueError when missing or invalid)."""
    path = Path(out_dir) / "population.json"
    if not path.is_file():
        raise ValueError(f"nothing to resume: {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable population file ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not data.get("nodes"):
        raise ValueError(f"{path}: not a {FORMAT} population file")
    return data


def _best(nodes: list[dict]) -> dict | None:
    ok = [n for n in nodes if n["ok"]]
    return max(ok, key=lambda n: (n["score"], -n["id"])) if ok else None


def _summary(state: dict, out_dir: Path) -> dict:
    nodes = state["nodes"]
    best, root = _best(nodes), nodes[0]
    calls = [n for n in nodes if n["step"] >= 0]
    fails = [n for n in calls if not n["ok"]]
    per_model: dict[str, dict[str, Any]] = {}
    for n in calls:
        m = per_model.setdefault(n["model"], {"calls": 0, "ok": 0, "failures": 0, "cost": 0.0,
                                              "best_excess": None})
        m["calls"] += 1
        m["cost"] += n["cost"]
        if n["ok"]:
            m["ok"] += 1
            if m["best_excess"] is None or n["excess"] < m["best_excess"]:
                m["best_excess"] = n["excess"]
        else:
            m["failures"] += 1
    return {
        "best_id": best["id"] if best else None,
        "best_model": best["model"] if best else None,
        "best_score": best["score"] if best else None,
        "best_excess": best["excess"] if best else None,
        "baseline_excess": root["excess"],
        "n_nodes": len(nodes),
        "calls": len(calls),
        "calls_per_model": dict(Counter(n["model"] for n in calls)),
        "per_model": per_model,
        "failures": len(fails),
        "failure_reasons": dict(Counter((n["error"] or "unknown")[:120] for n in fails)),
        "total_cost": float(sum(n["cost"] for n in nodes)),
        "segments": len(state["segments"]),
        "out_dir": str(out_dir),
    }


def _report(state: dict, s: dict) -> str:
    p = state["problem"]
    lines = ["# Ballad heuristic discovery: online bin packing", "",
             f"{p['n_instances']} Weibull instances x {p['n_items']} items, capacity "
             f"{p['capacity']:g}; excess = % bins above the L1 bound (lower is better).", ""]
    for seg in state["segments"]:
        lines.append(f"- segment {seg['segment']}: router `{seg['router']}`, seed "
                     f"{seg['seed']}, {seg['done']}/{seg['calls']} calls, models "
                     f"{', '.join(seg['models'])}")
    lines += ["", f"- best-fit baseline excess: {s['baseline_excess']:.4f} %"]
    if s["best_id"] is not None:
        lines.append(f"- best: node {s['best_id']} ({s['best_model'] or 'initial'}), "
                     f"excess {s['best_excess']:.4f} %")
    lines += [f"- nodes: {s['n_nodes']}, LLM calls: {s['calls']}, failures: {s['failures']}",
              f"- total cost: ${s['total_cost']:.6f}", ""]
    if s["per_model"]:
        lines += ["| model | calls | ok | failures | cost ($) | best excess (%) |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, m in s["per_model"].items():
            be = "-" if m["best_excess"] is None else f"{m['best_excess']:.4f}"
            lines.append(f"| {name} | {m['calls']} | {m['ok']} | {m['failures']} | "
                         f"{m['cost']:.6f} | {be} |")
        lines.append("")
    if s["failure_reasons"]:
        lines += ["Failure reasons:", ""]
        lines += [f"- {k} (x{v})" for k, v in s["failure_reasons"].items()]
        lines.append("")
    lines.append("Files: `population.json` (every node), `best.py` (best heuristic).")
    return "\n".join(lines) + "\n"


def _save(state: dict, out_dir: Path) -> dict:
    summary = _summary(state, out_dir)
    state["best"] = summary["best_id"]
    atomic_write(out_dir / "population.json", json.dumps(state, indent=1) + "\n")
    best = _best(state["nodes"])
    if best is not None:
        head = (f"# Best heuristic of jaxkit ballad discover: node {best['id']} "
                f"({best['model'] or 'initial'}), excess {best['excess']:.6f} % over L1\n")
        atomic_write(out_dir / "best.py", head + best["source"])
    atomic_write(out_dir / "report.md", _report(state, summary))
    return summary


def discover(proposers: Sequence, *, router: str | Router = "ballad", calls: int = 20,
             seed: int = 0, items: np.ndarray, capacity: float = 100.0,
             timeout: float = 30.0, out_dir: str | Path, resume: bool = False,
             progress: Callable[[int, dict], None] | None = None) -> dict:
    """Discover bin-packing heuristics with ``calls`` proposer (LLM) calls.

    ``proposers``: objects with ``name`` and ``propose(parents, context)`` (e.g.
    :class:`~jaxkit.ballad.llm.OpenAIChat`). ``router``: ``ballad``, ``ucb1``, ``uniform``,
    a proposer name, or a :class:`~jaxkit.ballad.search.Router`. ``items``:
    ``(n_instances, n_items)`` item sizes, evaluated with ``capacity`` in the sandbox with
    ``timeout`` seconds per candidate. ``progress(step, node)`` is called after each step
    (``node`` as saved in population.json). Returns a summary dict (best score / excess,
    total cost, calls per model, failures, ...)."""
    if not proposers:
        raise ValueError("no proposers: give at least one model (JAXKIT_LLM_POOL)")
    names = [str(getattr(p, "name", type(p).__name__)) for p in proposers]
    if len(set(names)) != len(names):
        raise ValueError(f"proposer names must be distinct; got {names}")
    calls = int(calls)
    if calls < 1:
        raise ValueError(f"`calls` must be >= 1; got {calls}")
    items = np.asarray(items, np.float64)
    if items.ndim == 1:
        items = items[None, :]
    if items.ndim != 2 or items.shape[1] == 0:
        raise ValueError(f"`items` must have shape (n_instances, n_items); got {items.shape}")
    out_dir = Path(out_dir)
    problem = _fingerprint(items, capacity)

    if resume:
        state = load_population(out_dir)
        if state.get("problem") != problem:
            raise ValueError(
                f"cannot resume {out_dir}: it was run on other instances "
                f"({state.get('problem')}); use the same --seed/--instances/--items")
        ok = sorted((n for n in state["nodes"] if n["ok"] and n.get("source")),
                    key=lambda n: (-n["score"], n["id"]))
        seeds, seen = [], set()
        for n in ok:
            if n["score"] not in seen and len(seeds) < N_ISLANDS * ISLAND_SIZE:
                seen.add(n["score"])
                seeds.append(n)
        if not seeds:
            raise ValueError(f"cannot resume {out_dir}: no successful node to start from")
        init = [Candidate(source=n["source"], note=f"node {n['id']}") for n in seeds]
        init_global = [n["id"] for n in seeds]
    else:
        if (out_dir / "population.json").exists():
            raise ValueError(f"{out_dir / 'population.json'} exists: continue it with resume "
                             "(--resume) or choose another output folder (--out)")
        out_dir.mkdir(parents=True, exist_ok=True)
        state = {"format": FORMAT, "problem": problem, "segments": [], "nodes": [],
                 "best": None}
        init = [Candidate(source=BEST_FIT_SOURCE, note="best fit")]
        init_global = [0]
    segment = len(state["segments"])
    step0 = 1 + max((n["step"] for n in state["nodes"]), default=-1)
    base = len(state["nodes"]) if resume else 1  # global id of the segment's first new node
    seg = {"segment": segment, "router": None, "seed": int(seed) + segment, "calls": calls,
           "done": 0, "models": names, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime())}
    capacity_nodes = len(init) + calls
    rt = make_router(router, names, capacity_nodes)
    seg["router"] = rt.name

    def to_global(local: int) -> int:
        return init_global[local] if local < len(init) else base + local - len(init)

    def saved(nd) -> dict:
        out = _search.EvalOutcome(nd.ok, nd.score, nd.error)
        return _node(to_global(nd.id), tuple(to_global(p) for p in nd.parents),
                     names[nd.model] if nd.model >= 0 else None,
                     step0 + nd.step if nd.step >= 0 else -1, out, nd.cost, nd.error,
                     nd.candidate.source if nd.candidate is not None else None)

    def on_step(t: int, logs) -> None:
        g = logs[0].genealogy
        if t < 0:  # the initial population is evaluated: save it before the first call
            if not resume:
                state["nodes"].append(saved(g.nodes[0]))
            state["segments"].append(seg)
            _save(state, out_dir)
            return
        node = saved(g.nodes[len(init) + t])
        state["nodes"].append(node)
        seg["done"] = t + 1
        _save(state, out_dir)
        if progress is not None:
            progress(t, node)

    try:
        _search.search(source_evaluator(items, capacity, timeout=timeout), proposers, [rt],
                       [int(seed) + segment], init=init, n_calls=calls, n_islands=N_ISLANDS,
                       island_size=ISLAND_SIZE, on_step=on_step)
    except ValueError as exc:
        if "initial candidate" in str(exc):
            raise ValueError(f"{exc} (check --timeout)") from exc
        raise
    seg["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return _save(state, out_dir)


def _node(gid: int, parents, model, step: int, out, cost: float, error, source) -> dict:
    ok = bool(out.ok)
    return {"id": int(gid), "parents": [int(p) for p in parents], "model": model,
            "step": int(step), "score": float(out.score) if ok else None,
            "excess": -float(out.score) if ok else None, "ok": ok,
            "error": None if ok else (error or "unknown failure"), "cost": float(cost),
            "source": source}
