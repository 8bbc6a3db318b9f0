"""The three stages of ``jaxkit run aira-compose``: search, extrapolation, scaling.

* :func:`stage1`: candidates of ``cfg.depth`` layers ranked by validation bits per
  byte; every policy of ``cfg.policies`` runs ``cfg.search_seeds`` times. Small spaces
  (``len(letters) ** depth <= cfg.table_max``) are trained exhaustively in one batch and searched
  by look-up; larger ones are trained round by round (each round's new strings of all
  policies and seeds together; every round its own cached stage); the agent's chat
  requests of a round are sent together; the user's ``strings`` are trained first.
* :func:`stage2`: the top strings, stacked and stretched to ``depth * depth_factor``
  layers at width ``width2``, with the Llama-style and Nemotron-style baselines and
  the scaling grid (the best string and the Llama-style string stacked to each depth
  of ``scaling_depths``), all trained together for ``seeds2`` initialisations.
* :func:`scaling`: Chinchilla approach-3 fits per architecture and seed on the
  (non-embedding parameters, tokens) grid, frontier slopes, "scales X% faster".

Functions return plain dicts of lists and arrays (picklable for ``ctx.stage``).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable

import jax
import numpy as np

from . import scaling as S
from .arch import Arch, llama_style, nemotron_style, stack, stretch
from .policies import make_policy
from .results import SearchRun
from .train import TrainSettings, train_candidates

__all__ = ["arch_of", "settings", "stage1", "stage2_plan", "stage2", "scaling",
           "FULL_DEPTH_LABEL", "PROMOTED", "promoted_plan"]


def arch_of(cfg, depth: int, width: int) -> Arch:
    return Arch("A" * depth, width=width, heads=cfg.heads, d_state=cfg.d_state,
                context=cfg.context, ssd_head_dim=cfg.ssd_head_dim, ssd_chunk=cfg.ssd_chunk)


def settings(cfg, steps: int, eval_at=()) -> TrainSettings:
    return TrainSettings(steps=steps, batch=cfg.batch, lr=cfg.lr, warmup=cfg.warmup,
                         chunk=cfg.chunk, checkpoint_every=cfg.checkpoint_every,
                         eval_at=tuple(eval_at), n_val=cfg.n_val, dtype=cfg.dtype)


def _search_all(cfg, key, evaluate: Callable[[list[str]], dict], proposer=None,
                known: dict[str, float] | None = None) -> dict:
    """All policies x seeds in lockstep rounds; ``evaluate(new strings) -> {s: loss}``.
    The agent runs ``agent.seeds`` seeds (the first ones, paired with the others'), its
    round's chat requests of all seeds sent together to ``proposer``
    (:class:`jaxkit.compose.agent.Proposer`; None: every proposal a fallback)."""
    runs = {}
    for p in cfg.policies:
        n_seeds = (min(cfg.search_seeds, cfg.agent.seeds) if p == "agent"
                   else cfg.search_seeds)
        for seed in range(n_seeds):
            k = jax.random.fold_in(jax.random.fold_in(key, seed), zlib.crc32(p.encode()))
            rng = np.random.default_rng([seed, sum(map(ord, p))])
            runs[(p, seed)] = dict(policy=make_policy(p, cfg.depth, k,
                                                      population=cfg.population,
                                                      sample=cfg.tournament,
                                                      alphabet=cfg.alphabet,
                                                      composer_alphabet=cfg.composer_alphabet),
                                   rng=rng, strings=[], losses=[])
    known = dict(known or {})  # strings already trained (a user's), never retrained
    rnd = 0
    while any(len(r["strings"]) < cfg.budget for r in runs.values()):
        asks, agents = {}, []
        for rk, r in runs.items():
            n = min(cfg.search_batch, cfg.budget - len(r["strings"]))
            if rk[0] == "agent" and proposer is not None and n > 0:
                agents.append((rk, n))
            else:
                asks[rk] = [r["policy"].ask(r["rng"]) for _ in range(n)]
        replies = proposer.complete([runs[rk]["policy"].request(n) for rk, n in agents]
                                    ) if agents else []
        for (rk, n), reply in zip(agents, replies, strict=True):
            asks[rk] = runs[rk]["policy"].accept(reply, n, runs[rk]["rng"])
        new = sorted({s for a in asks.values() for s in a} - set(known))
        if new:
            known.update(evaluate(new, rnd))
        for rk, a in asks.items():
            r = runs[rk]
            for s in a:
                r["policy"].tell(s, known[s])
                r["strings"].append(s)
                r["losses"].append(known[s])
        rnd += 1
    out: dict[str, list[SearchRun]] = {}
    for (p, _seed), r in runs.items():
        pol = r["policy"]
        out.setdefault(p, []).append(SearchRun.from_history(
            r["strings"], r["losses"], pulls=getattr(pol, "pulls", ()),
            agent=pol.counts() if hasattr(pol, "counts") else None))
    res = dict(runs=out, evaluated=known)
    if proposer is not None:
        res["agent"] = dict(model=proposer.model, endpoint=proposer.endpoint,
                            cache=str(proposer.cache_path), hits=proposer.hits,
                            misses=proposer.misses, offline=proposer.offline,
                            failures=proposer.failures[:5])
    return res


def stage1(key, cfg, corpus, *, mesh=None, checkpoint_dir=None, resume=True,
           cache=None, proposer=None) -> dict:
    """Stage 1 (module docstring). ``cache(name, fn)`` caches each training round;
    ``proposer`` answers the agent's chat requests (:func:`_search_all`)."""
    arch = arch_of(cfg, cfg.depth, cfg.width)
    s = settings(cfg, cfg.steps)
    k_train, k_search = jax.random.split(key)
    cache = cache or (lambda name, fn, config=None: fn())
    meta = {}

    def train(strings, name):
        def fn():
            r = train_candidates(k_train, arch, strings, corpus, s, mesh=mesh,
                                 checkpoint_dir=None if checkpoint_dir is None
                                 else checkpoint_dir / name, resume=resume)
            return dict(losses=dict(zip(strings, r.val_bpb[-1].tolist(), strict=True)),
                        tokens_per_s=r.tokens_per_s, flops_per_s=r.flops_per_s,
                        compile_s=r.compile_s)
        # keyed by the strings too: a round whose proposals changed (an endpoint's new
        # replies) is never reloaded from another round's training
        res = cache(f"aira-compose-{name}", fn, config=tuple(strings))
        meta.setdefault("trainings", []).append(
            {k: res[k] for k in ("tokens_per_s", "flops_per_s", "compile_s")}
            | {"n": len(strings)})
        return res["losses"]

    letters = "".join(sorted(set(cfg.alphabet) | set(cfg.composer_alphabet),
                             key="AMSD".index))
    exhaustive = len(letters) ** cfg.depth <= cfg.table_max
    if exhaustive:
        table = train(["".join(p) for p in itertools.product(letters, repeat=cfg.depth)],
                      "stage1-table")
        res = _search_all(cfg, k_search, lambda new, rnd: {x: table[x] for x in new},
                          proposer)
        user = {u: table[u] for u in getattr(cfg, "strings", ())}
    else:
        user = train(list(cfg.strings), "stage1-user") if getattr(cfg, "strings", ()) else {}
        res = _search_all(cfg, k_search, lambda new, rnd: train(new, f"stage1-round{rnd}"),
                          proposer, known=user)
        table = res["evaluated"]
    return dict(res, table=table, exhaustive=exhaustive, user=user, **meta)


def stage2_plan(cfg, s1: dict) -> dict[str, str]:
    """The stage-2 architectures ``{label: string}`` (module docstring)."""
    d2 = cfg.depth * cfg.depth_factor
    guided = [p for p in cfg.policies if p != "composer"]
    found = {s: v for p in guided for r in s1["runs"][p] for s, v in
             zip(r.strings, r.losses, strict=True)}
    top = sorted(found, key=found.get)[:cfg.top_k]
    plan = {}
    for i, s in enumerate(top):
        plan[f"best{i + 1}-stack"] = stack(s, d2)
        plan[f"best{i + 1}-stretch"] = stretch(s, cfg.depth_factor)
    comp_best = None
    if "composer" in s1["runs"]:
        comp = {s: v for r in s1["runs"]["composer"] for s, v in
                zip(r.strings, r.losses, strict=True)}
        comp_best = min(comp, key=comp.get)
        plan["composer-stack"] = stack(comp_best, d2)
    mamba = "D" if "D" in cfg.alphabet else "S"
    plan["llama"] = llama_style(d2)
    plan["nemotron"] = nemotron_style(d2, mamba)
    families = getattr(cfg, "scaling_families", ("llama",))
    for d in sorted(set(cfg.scaling_depths) - {d2}):
        plan[f"best1@{d}"] = stack(top[0], d)
        if "llama" in families:
            plan[f"llama@{d}"] = llama_style(d)
        if "composer" in families and comp_best is not None:
            plan[f"composer@{d}"] = stack(comp_best, d)
        if "nemotron" in families:
            plan[f"nemotron@{d}"] = nemotron_style(d, mamba)
    for i, u in enumerate(getattr(cfg, "strings", ()), 1):
        plan[f"user{i}"] = stack(u, d2)
        for d in sorted(set(cfg.scaling_depths) - {d2}):
            plan[f"user{i}@{d}"] = stack(u, d)
    plan.update(promoted_plan(cfg, s1))
    return plan


PROMOTED = "promoted:"  # the label prefix of a policy's own per-seed best (one init)


def promoted_plan(cfg, s1: dict) -> dict[str, str]:
    """``{"promoted:<policy>/<seed>": the best string of that policy's search seed,
    stacked to the stage-2 depth}`` for the first ``cfg.promote_seeds`` seeds."""
    d2 = cfg.depth * cfg.depth_factor
    k = getattr(cfg, "promote_seeds", 0)
    return {f"{PROMOTED}{p}/{i}": stack(r.best, d2) for p, runs in s1["runs"].items()
            for i, r in enumerate(runs[:k])}


def stage2(key, cfg, corpus, plan: dict[str, str], *, mesh=None, checkpoint_dir=None,
           resume=True) -> dict:
    """Train every architecture of ``plan`` for ``cfg.seeds2`` initialisations
    together; the same initialisation key per seed index for every architecture and
    the same batches for all (paired comparisons)."""
    d2 = cfg.depth * cfg.depth_factor
    arch = arch_of(cfg, d2, cfg.width2)
    labels = [lab for lab in plan if not lab.startswith(PROMOTED)]
    promoted = [lab for lab in plan if lab.startswith(PROMOTED)]
    strings = [plan[lab] for lab in labels for _ in range(cfg.seeds2)]
    strings += [plan[lab] for lab in promoted]
    k_init, k_train = jax.random.split(key)
    seed_keys = jax.random.split(k_init, cfg.seeds2)
    init_keys = jax.numpy.concatenate([seed_keys] * len(labels)
                                      + [seed_keys[:1]] * len(promoted))
    r = train_candidates(k_train, arch, strings, corpus,
                         settings(cfg, cfg.steps2, cfg.scaling_budgets), init_keys=init_keys,
                         mesh=mesh, checkpoint_dir=checkpoint_dir, resume=resume)
    n_b = len(r.steps)
    n_main = len(labels) * cfg.seeds2
    bpb = r.val_bpb[:, :n_main].reshape(n_b, len(labels), cfg.seeds2)
    # each promoted string: one initialisation (seed index 0's key), its own column
    prom = {lab: r.val_bpb[:, n_main + j:n_main + j + 1].tolist()
            for j, lab in enumerate(promoted)}
    best_i = labels.index("best1-stack") * cfg.seeds2
    best_params = jax.tree.map(lambda a: np.asarray(a[best_i]), r.params)
    return dict(labels=labels, strings=[plan[lab] for lab in labels],
                n_params=[arch.with_layers(plan[lab]).n_params() for lab in labels],
                steps=r.steps.tolist(), tokens=r.tokens.tolist(),
                bpb={lab: bpb[:, i].tolist() for i, lab in enumerate(labels)},
                promoted={lab: dict(string=plan[lab], bpb=prom[lab]) for lab in promoted},
                tokens_per_s=r.tokens_per_s, flops_per_s=r.flops_per_s,
                compile_s=r.compile_s, best_params=best_params, letters=r.letters,
                arch=dict(width=cfg.width2, heads=cfg.heads, d_state=cfg.d_state,
                          context=cfg.context, depth=d2))


#: the stage-2 label of each scaling family at the stage-2 depth
FULL_DEPTH_LABEL = {"best1": "best1-stack", "llama": "llama", "composer": "composer-stack",
                    "nemotron": "nemotron"}  # a user's family "user<i>" is its own label


def _grid(s2, family: str, cfg, seed: int | None):
    d2 = cfg.depth * cfg.depth_factor
    labels = {d: FULL_DEPTH_LABEL.get(family, family) if d == d2 else f"{family}@{d}"
              for d in set(cfg.scaling_depths) | {d2}}
    N, D, L = [], [], []
    for _, lab in sorted(labels.items()):
        i = s2["labels"].index(lab)
        vals = np.asarray(s2["bpb"][lab])  # (budgets, seeds)
        for j, tok in enumerate(s2["tokens"]):
            N.append(s2["n_params"][i])
            D.append(tok)
            L.append(vals[j].mean() if seed is None else vals[j, seed])
    return np.asarray(N), np.asarray(D), np.asarray(L)


def scaling(s2: dict, cfg) -> dict:
    """Fits per family (``best1`` and each of ``cfg.scaling_families`` whose grid stage 2
    trained): on the seed means and on each seed; ``faster[family]``: "scales X% faster"
    of ``best1`` against that family, on the seed means (``pct``) and per seed
    (``pct_seeds``); ``faster_pct`` / ``faster_pct_seeds``: against ``llama``."""
    out = {}
    d2 = cfg.depth * cfg.depth_factor
    users = [f"user{i}" for i in range(1, len(getattr(cfg, "strings", ())) + 1)]
    fams = [f for f in (*getattr(cfg, "scaling_families", ("llama",)), *users)
            if all((FULL_DEPTH_LABEL.get(f, f) if d == d2 else f"{f}@{d}") in s2["labels"]
                   for d in set(cfg.scaling_depths) | {d2})]
    out["families"] = fams
    for fam in ("best1", *fams):
        N, D, L = _grid(s2, fam, cfg, None)
        fit = S.fit_chinchilla(N, D, L, n_starts=3, maxiter=cfg.fit_maxiter)
        per_seed = [S.fit_chinchilla(*_grid(s2, fam, cfg, k), n_starts=3,
                                     maxiter=cfg.fit_maxiter)
                    for k in range(cfg.seeds2)]
        out[fam] = dict(N=N.tolist(), D=D.tolist(), L=L.tolist(), fit=fit._asdict(),
                        gamma=fit.gamma, gamma_seeds=[f.gamma for f in per_seed],
                        fits_seeds=[f._asdict() for f in per_seed])
    N, D = np.asarray(out["best1"]["N"]), np.asarray(out["best1"]["D"])
    out["span"] = (float(N.max() / N.min()), float(D.max() / D.min()))
    out["faster"] = {fam: dict(
        pct=S.scales_faster(S.ScalingFit(**out["best1"]["fit"]),
                            S.ScalingFit(**out[fam]["fit"])),
        pct_seeds=[100 * (a / b - 1) for a, b in zip(
            out["best1"]["gamma_seeds"], out[fam]["gamma_seeds"], strict=True)])
        for fam in fams}
    if "llama" in out["faster"]:
        out["faster_pct"] = out["faster"]["llama"]["pct"]
        out["faster_pct_seeds"] = out["faster"]["llama"]["pct_seeds"]
    return out


def synthetic_check(rng: np.random.Generator) -> dict:
    """The fit on synthetic losses from Chinchilla's parameters (a 4 x 4 grid, 0.5%
    log-normal noise): the recovered parameters."""
    n, d, L = S.synthetic_losses(rng, np.geomspace(1e7, 1e10, 4), np.geomspace(1e9, 1e12, 4),
                                 noise=0.005)
    f = S.fit_chinchilla(n, d, L, n_starts=3)
    return dict(true=dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28),
                fit=f._asdict())
