"""Fair baselines and readable scaling (issue 62, parts 2 and 3) for
``jaxkit run aira-compose``.

Six families, each trained as separate runs per (model size, token budget):

* ``found-T`` (AIRAformer): the best pure-attention string ({A, M}, with an A) of the
  guided policies' stage-1 searches (agent, evolution, bandits; not random, not
  Composer), chosen on the selection split;
* ``found-H`` (AIRAhybrid): their best hybrid string (an A and a Mamba letter);
* ``composer-T``: the Composer-like policy's best pure-attention string (same budget);
* ``composer-H``: its best hybrid, or, when Composer's alphabet has no Mamba letter,
  random search's best hybrid at the same budget (stated in the report); both stacked
  with depth, width and MLP ratio matched to the found family's parameters
  (:func:`~jaxkit.compose.runs.match_compose`);
* ``llama``: the Llama-style model of :mod:`jaxkit.compose.llama` (jaxkit.lm's RMSNorm,
  RoPE, grouped-query attention, SwiGLU), ``scale.depth // 2`` blocks at each width,
  its SwiGLU width matched to ``found-T``'s parameters;
* ``nemotron``: the Nemotron-H-style hybrid string (:func:`~jaxkit.compose.arch.nemotron_style`,
  Mamba/MLP with one mixer in four attention), depth and width matched to ``found-H``.

Strings are stacked to ``scale.depth`` layers; the sizes are the widths
``scale.widths``, the budgets the step counts ``scale.steps`` (tokens: steps x
``scale.batch`` x ``scale.context`` bytes), every run with its own cosine schedule
(:mod:`jaxkit.compose.runs`), ``scale.seeds`` initialisations, on the training bytes, scored
on the test half of the held-out bytes. The fair comparison at a fixed budget reads the
largest cell; the scaling fits (:mod:`jaxkit.compose.vpfit`) use every cell.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from . import vpfit
from .arch import nemotron_style, stack
from .runs import RunSettings, compose_spec, match_compose, match_llama, train_runs

__all__ = ["FAMILIES", "choose_strings", "fair_plan", "run_grid", "fit_grid",
           "synthetic"]

FAMILIES = ("found-T", "found-H", "composer-T", "composer-H", "llama", "nemotron")
#: which found family each baseline is matched to and compared with
AGAINST = {"llama": "found-T", "composer-T": "found-T", "nemotron": "found-H",
           "composer-H": "found-H"}
UNGUIDED = ("random", "composer")


def _is_T(s: str) -> bool:
    return "A" in s and set(s) <= set("AM")


def _is_H(s: str) -> bool:
    return "A" in s and bool(set(s) & set("SD"))


def _best(s1: dict, policies, keep) -> str | None:
    seen = {s: v for p in policies if p in s1["runs"] for r in s1["runs"][p]
            for s, v in zip(r.strings, r.losses, strict=True) if keep(s)}
    return min(seen, key=seen.get) if seen else None


def choose_strings(cfg, s1: dict) -> dict:
    """``{family: string or None}`` for the four string families, and ``notes``: how
    each was chosen (module docstring)."""
    guided = [p for p in cfg.policies if p not in UNGUIDED]
    out = {"found-T": _best(s1, guided, _is_T), "found-H": _best(s1, guided, _is_H),
           "composer-T": _best(s1, ["composer"], _is_T)}
    notes = {"found-T": "best {A, M} string of " + ", ".join(guided),
             "found-H": "best hybrid string of " + ", ".join(guided),
             "composer-T": "best {A, M} string of the Composer-like search"}
    if set(cfg.composer_alphabet) & set("SD"):
        out["composer-H"] = _best(s1, ["composer"], _is_H)
        notes["composer-H"] = "best hybrid string of the Composer-like search"
    else:
        out["composer-H"] = _best(s1, ["random"], _is_H)
        notes["composer-H"] = (f"Composer's alphabet {{{', '.join(cfg.composer_alphabet)}}} "
                               "has no Mamba letter: random search's best hybrid at the "
                               "same budget")
    notes["llama"] = "jaxkit.lm's layers, SwiGLU width matched to found-T"
    notes["nemotron"] = "Nemotron-H-style string, matched to found-H"
    for k, v in out.items():
        if v is None:
            notes[k] = "none evaluated: " + notes[k]
    return dict(strings=out, notes=notes)


def fair_plan(cfg, s1: dict) -> dict:
    """The grid: ``{family: [spec per width]}`` (None where a family has no string) with
    the chosen strings, notes and each spec's non-embedding parameters."""
    ch = choose_strings(cfg, s1)
    st = ch["strings"]
    ctx, depth = cfg.scale.context, cfg.scale.depth
    mamba = "D" if "D" in cfg.alphabet else "S"
    specs = {f: [] for f in FAMILIES}
    patterns = dict(st, nemotron=nemotron_style(depth, mamba))
    for w in cfg.scale.widths:
        for f in ("found-T", "found-H"):
            specs[f].append(None if st[f] is None else compose_spec(
                stack(st[f], depth), w, cfg, ctx))
        t = specs["found-T"][-1]
        specs["llama"].append(None if t is None else match_llama(
            t.n_params, w, max(1, depth // 2), cfg.heads, ctx))
        for b in ("composer-T", "composer-H", "nemotron"):
            ref = specs[AGAINST[b]][-1]
            specs[b].append(None if ref is None or patterns[b] is None else match_compose(
                patterns[b], ref.n_params, w, cfg, ctx, depth=depth))
    return dict(specs=specs, strings=st, notes=ch["notes"],
                n_params={f: [None if s is None else s.n_params for s in v]
                          for f, v in specs.items()},
                describe={f: [None if s is None else s.describe() for s in v]
                          for f, v in specs.items()})


def settings(cfg) -> RunSettings:
    return RunSettings(batch=cfg.scale.batch, lr=cfg.scale.lr, chunk=cfg.scale.chunk,
                       checkpoint_every=cfg.checkpoint_every, n_val=cfg.n_val)


def run_grid(key, cfg, corpus, plan: dict, *, checkpoint_dir: str | Path | None = None,
             resume: bool = True, log=None) -> dict:
    """Train every (family, width, steps) cell of ``plan`` for ``cfg.scale.seeds``
    seeds: ``{family: {"bpb": (widths, budgets, seeds) list, "N", "D", "seconds"}}``
    (None for a family without a string). The same initialisation and batch keys for
    every family (paired over seeds)."""
    s = settings(cfg)
    out = {}
    for f, specs in plan["specs"].items():
        if any(sp is None for sp in specs):
            out[f] = None
            continue
        bpb, secs = [], 0.0
        for i, sp in enumerate(specs):
            row = []
            for steps in cfg.scale.steps:
                ck = None if checkpoint_dir is None else (
                    Path(checkpoint_dir) / f"{f}-w{cfg.scale.widths[i]}-s{steps}")
                r = train_runs(jax.random.fold_in(key, i), sp, corpus, int(steps), s,
                               seeds=cfg.scale.seeds, checkpoint_dir=ck, resume=resume)
                row.append(r["bpb"])
                secs += r["seconds"]
                if log is not None:
                    log(f"{f} width {cfg.scale.widths[i]} steps {steps}: "
                        f"{np.mean(r['bpb']):.3f} bits/byte")
            bpb.append(row)
        out[f] = dict(bpb=bpb, N=[sp.n_params for sp in specs],
                      D=[int(st) * cfg.scale.batch * cfg.scale.context
                         for st in cfg.scale.steps], seconds=secs)
    return out


def _cells(g: dict):
    N, D = np.meshgrid(np.asarray(g["N"], float), np.asarray(g["D"], float), indexing="ij")
    L = np.asarray(g["bpb"], float)  # (widths, budgets, seeds)
    return N.ravel(), D.ravel(), L.reshape(-1, L.shape[-1])


def fit_grid(cfg, grid: dict, rng: np.random.Generator) -> dict:
    """Per family: the fit of the seed means, of each seed, and joint bootstrap
    intervals over seeds (the same resampled seeds for every family, so "X% faster"
    has paired intervals); ``faster[baseline]``: per-seed and bootstrap
    ``X = 100 (gamma_found / gamma_baseline - 1)`` against its found family."""
    kw = dict(bounds=tuple(cfg.fit_bounds))
    fams = [f for f in FAMILIES if grid.get(f) is not None]
    out = {"families": fams}
    k = cfg.scale.seeds
    idx = [rng.integers(0, k, k) for _ in range(cfg.n_boot)]
    for f in fams:
        N, D, L = _cells(grid[f])
        mean = vpfit.vp_fit(N, D, L.mean(1), **kw)
        seeds = [vpfit.vp_fit(N, D, L[:, j], **kw) for j in range(k)]
        boot = [vpfit.vp_fit(N, D, L[:, i].mean(1), **kw) for i in idx]
        q = (5.0, 95.0)
        out[f] = dict(fit=mean._asdict(), gamma=mean.gamma,
                      seeds=[s._asdict() for s in seeds], gamma_seeds=[s.gamma for s in seeds],
                      boot_gamma=[b.gamma for b in boot],
                      ci={p: tuple(float(x) for x in np.percentile(
                          [getattr(b, p) for b in boot], q)) for p in ("E", "a", "b", "gamma")},
                      boot_degenerate=float(np.mean([b.degenerate for b in boot])))
    out["faster"] = {}
    for base, found in AGAINST.items():
        if base in out and found in out:
            gf, gb = out[found], out[base]
            xb = 100 * (np.asarray(gf["boot_gamma"]) / np.asarray(gb["boot_gamma"]) - 1)
            out["faster"][base] = dict(
                found=found, pct=100 * (gf["gamma"] / gb["gamma"] - 1),
                pct_seeds=[100 * (a / b - 1) for a, b in zip(
                    gf["gamma_seeds"], gb["gamma_seeds"], strict=True)],
                ci=tuple(float(x) for x in np.percentile(xb, (5.0, 95.0))),
                degenerate=[f"{fam} {'seed means' if j is None else f'seed {j}'}: "
                            + "; ".join(fit["reasons"])
                            for fam in (found, base)
                            for j, fit in [(None, out[fam]["fit"]),
                                           *enumerate(out[fam]["seeds"])]
                            if fit["degenerate"]])
    N = np.asarray(grid[fams[0]]["N"]) if fams else np.ones(1)
    D = np.asarray(grid[fams[0]]["D"]) if fams else np.ones(1)
    out["span"] = (float(N.max() / N.min()), float(D.max() / D.min()))
    out["shape"] = (len(cfg.scale.widths), len(cfg.scale.steps))
    return out


def synthetic(cfg, rng: np.random.Generator, grid: dict) -> dict:
    """The fit check: known ``(E, A, a, B, b)`` on a 4 x 4 grid spanning
    ``max(10, the run's span)`` in N and D from the run's smallest N and D (each term
    equal to the floor at the smallest cell), ``cfg.synth_noise`` log-normal noise,
    refitted; passes when every parameter is within ``cfg.fit_tolerance``."""
    g = next((grid[f] for f in FAMILIES if grid.get(f) is not None), None)
    n0, d0 = (min(g["N"]), min(g["D"])) if g else (1e4, 1e5)
    n1 = max(10 * n0, max(g["N"]) if g else 0)
    d1 = max(10 * d0, max(g["D"]) if g else 0)
    true = dict(E=1.5, a=0.35, b=0.3)
    true.update(A=1.5 * n0 ** true["a"], B=1.5 * d0 ** true["b"])
    return vpfit.synthetic_check(rng, np.geomspace(n0, n1, 4), np.geomspace(d0, d1, 4),
                                 true=true, noise=cfg.synth_noise,
                                 tolerance=cfg.fit_tolerance, bounds=tuple(cfg.fit_bounds))
