"""The real-proposer experiment of ``jaxkit run ballad``: SmolLM2-135M-Instruct writing
Python bin-packing heuristics (:mod:`jaxkit.ballad.smol`), every program run in the jail.

Instances (generated exactly as specified; no download):

* ``binpacking_weibull``: FunSearch's Weibull set (Romera-Paredes et al. 2024): item
  sizes Weibull(scale 45, shape 3), rounded and clipped to [1, 100], capacity 100
  (5000 items at full size); :func:`jaxkit.ballad.discover.weibull_items`;
* ``binpacking_or``: the OR-Library "u" classes binpack1-4 (Falkenauer 1996; u120, u250,
  u500, u1000): integer sizes uniform on [20, 100], capacity 150 (``real.items`` is the
  class: 120, 250, 500 or 1000 items).

The instances are drawn by :mod:`jaxkit.ballad.problems`' generators from the run's keys
(``real-train`` / ``real-val`` / ``real-test`` under the run's seed), not the files of
the OR-Library (there is no network): same distribution, other draws. The L1 bounds of
the test instances are recorded with the result.

Training, validation and test instances come from three different keys of the run
(disjoint draws); the objective is the excess of bins over the L1 bound (percent, lower
is better), computed by the jail's parent (:mod:`jaxkit.jail.packing`).

Two phases, both from the initial population {best fit, best fit written as library
terms}:

1. each real member alone (``only smol-fewshot``, ``only smol-free``, ``only
   smol-fewshot-hot``) for ``real.seeds`` x ``real.calls``; their recorded statistics
   (:func:`member_stats`: failure rate, improvement over the parent, novelty, tokens per
   call) calibrate the simulated members;
2. the pool of the real members plus one simulated member per real one
   (:func:`calibrated_members`), under every router (Ballad, its three ablations, the
   cost-aware Ballads, UCB1, uniform, each simulated member alone); the phase-1 solo runs
   are the real members' solo rows.

The best program of every run is scored on the validation and test instances, so
:func:`jaxkit.ballad.report.section` and :func:`~jaxkit.ballad.report.claims` apply.
Cost is thousands of tokens (prompt plus completion) for the real members and the
calibrated price for the simulated ones.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from jaxkit.claims import Claim
from jaxkit.jail.packing import l1_bound
from jaxkit.report import markdown_table
from jaxkit.stats import as_generator

from . import search as S_
from .config import Config
from .llm import Candidate
from .pools import SimulatedLLM
from .program import SourceEditor, program_source, program_terms
from .report import PAPER
from .results import RealRuns
from .smol import MEMBERS, Backend, ReplyCache

__all__ = ["search_real", "real_section", "member_stats", "calibrated_members",
           "real_instances", "shift_claim", "moved", "run_claims", "CAPACITY", "DEFAULT_CACHE",
           "FIRST_FIT_SOURCE"]

CAPACITY = {"binpacking_weibull": 100.0, "binpacking_or": 150.0}
DEFAULT_CACHE = Path(__file__).parent / "replies" / "smollm2-135m.jsonl"
FIRST_FIT_SOURCE = '''import numpy as np


def priority(item, bins):
    """First fit: the earliest opened bin that fits."""
    return -np.arange(len(bins), dtype=float)
'''


def real_instances(problem: str, seed: int, n: int, items: int) -> np.ndarray:
    """``(n, items)`` item sizes of ``problem`` (module docstring) from ``seed``."""
    import jax

    from . import problems
    from .discover import weibull_items

    if problem == "binpacking_weibull":
        return weibull_items(seed, n, items)
    if problem == "binpacking_or":
        inst = problems.make("binpacking_or", items).generate(jax.random.key(seed), n)
        return np.asarray(inst["items"], np.float64)
    raise ValueError(f"`real.problem` must be one of {', '.join(CAPACITY)}; got {problem!r}")


def member_stats(logs: list, names: list[str], baseline: float) -> dict[str, dict]:
    """Per proposer, over every call of ``logs``: ``calls``, ``failure_rate``,
    ``improve_rate`` (a child scoring above its best parent), ``beats_rate`` (above
    ``baseline``, e.g. first fit on the training instances), ``novelty`` (a working
    child whose score no earlier node of its run had), ``tokens`` (mean cost per call)
    ``copy_rate`` (a working child that is one of its parents up to comments, docstrings,
    annotations and layout), ``new_beats_rate`` (above ``baseline`` and not a copy) and
    the most common failure reasons."""
    acc: dict[str, dict[str, Any]] = {}
    for log in logs:
        seen: set[float] = set()
        for nd in log.genealogy.nodes:
            if nd.step < 0:
                seen.add(nd.score)
                continue
            a = acc.setdefault(names[nd.model], dict(calls=0, fail=0, improve=0, beats=0,
                                                      novel=0, copy=0, new_beats=0,
                                                      cost=0.0,
                                                      errors=Counter()))
            a["calls"] += 1
            a["cost"] += nd.cost
            if not nd.ok:
                a["fail"] += 1
                a["errors"][_reason(nd.error or "")] += 1
                continue
            parents = [log.genealogy.nodes[p].score for p in nd.parents]
            src = _shape(nd.candidate.source if nd.candidate else None)
            copy = bool(src is not None and any(
                src == _shape(log.genealogy.nodes[p].candidate.source) for p in nd.parents))
            a["copy"] += copy
            a["new_beats"] += bool(not copy and nd.score > baseline)
            a["improve"] += bool(parents and nd.score > max(parents))
            a["beats"] += bool(nd.score > baseline)
            a["novel"] += nd.score not in seen
            seen.add(nd.score)
    out = {}
    for name, a in acc.items():
        n = max(a["calls"], 1)
        out[name] = dict(calls=a["calls"], failure_rate=a["fail"] / n,
                         improve_rate=a["improve"] / n, beats_rate=a["beats"] / n,
                         novelty=a["novel"] / n, copy_rate=a["copy"] / n,
                         new_beats_rate=a["new_beats"] / n,
                         tokens=a["cost"] / n,
                         errors=dict(a["errors"].most_common(4)))
    return out


def _shape(src: str | None) -> str | None:
    """The program without comments, docstrings, imports and layout (to spot copies)."""
    import ast

    try:
        tree = ast.parse(src or "")
    except SyntaxError:
        return None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for fn in fns:
        if fn.body and isinstance(fn.body[0], ast.Expr) \
                and isinstance(fn.body[0].value, ast.Constant):
            fn.body = fn.body[1:] or [ast.Pass()]
        fn.returns = None
        for a in fn.args.args:
            a.annotation = None
    return "\n".join(ast.dump(fn) for fn in fns) or None


def _reason(error: str) -> str:
    e = error.lower()
    for key, label in (("no code", "no code in reply"), ("no parsable", "no parsable function"),
                       ("offline replay", "not in the cache"), ("timeout", "time limit"),
                       ("time limit", "time limit")):
        if key in e:
            return label
    return "ran but failed in the jail" if error else "unknown"


class CalibratedEditor:
    """A simulated member in program space: a :class:`~jaxkit.ballad.program.SourceEditor`
    that edits the library-shaped programs among its parents and island (a program a real
    model wrote is not in that shape: it then edits best fit's terms)."""

    def __init__(self, editor: SourceEditor):
        self.editor = editor
        self.name, self.cost = editor.name, editor.cost

    def propose(self, parents, context):
        ok = [p for p in parents if _readable(p.source)]
        if not ok:
            ok = [Candidate(source=program_source(-np.eye(10)[0], self.editor.capacity))]
        ex = [(s, v) for s, v in context.get("source_examples", ()) if _readable(s)]
        return self.editor.propose(ok, dict(context, source_examples=ex))


def _readable(src: str | None) -> bool:
    try:
        program_terms(src or "")
        return True
    except ValueError:
        return False


def calibrated_members(stats: dict[str, dict], capacity: float) -> list[CalibratedEditor]:
    """One simulated member per real one, from its recorded statistics only: failure
    probability = its failure rate; insight (pull towards the island's best) = its
    improvement rate; step = 0.02 + 0.3 x its novelty (new behaviour needs larger edits);
    price = its mean tokens per call. Named ``sim-<real name>``."""
    out = []
    for name, st in sorted(stats.items()):
        model = SimulatedLLM(f"sim-{name}", cost=max(st["tokens"], 1e-6),
                             step=0.02 + 0.3 * st["novelty"], insight=st["improve_rate"],
                             fail_prob=min(st["failure_rate"], 0.95))
        out.append(CalibratedEditor(SourceEditor(model, capacity)))
    return out


def search_real(cfg: Config, keys: dict[str, Any], *, out_dir=None) -> RealRuns:
    """Both phases (module docstring). ``keys``: ``train`` / ``val`` / ``test`` /
    ``search``; with ``cfg.real.plugin`` the plug-in's instances and description are used
    (:mod:`jaxkit.ballad.plugin`). Replies are read from the committed cache
    (:data:`DEFAULT_CACHE`, bin packing only) and ``cfg.real.cache``; new ones are appended
    to ``cfg.real.cache`` or ``out_dir/replies.jsonl``, never to the package. Returns
    the result in :func:`jaxkit.ballad.compare.search_problem`'s shape plus ``stats``
    (phase 1), ``calibration``, ``first_fit_test`` and cache counts."""
    from jaxkit.jail.sandbox import evaluate_many

    from .discover import BEST_FIT_SOURCE

    task = None
    if cfg.real.plugin:
        from .plugin import load_plugin

        plug = load_plugin(cfg.real.plugin)
        prob, cap, task = f"plugin:{plug.name}", plug.capacity, plug.description or None
        data = {"train": plug.train, "val": plug.val, "test": plug.test}
        cache = cfg.real.cache or Path(out_dir or ".") / "replies.jsonl"
    else:
        prob, cap = cfg.real.problem, CAPACITY[cfg.real.problem]
        seed_of = lambda k: int(as_generator(k).integers(2**31 - 1))  # noqa: E731
        data = {s: real_instances(prob, seed_of(keys[s]), n, cfg.real.items)
                for s, n in (("train", cfg.train_instances), ("val", cfg.val_instances),
                             ("test", cfg.test_instances))}
        cache = cfg.real.cache or Path(out_dir or ".") / "replies.jsonl"
    _disjoint(data)
    # the committed replies are read, never written (new ones go to `cache`, the user's)
    shipped = None if cfg.real.plugin or Path(cache) == DEFAULT_CACHE else DEFAULT_CACHE
    backend = Backend(ReplyCache(cache, shipped=shipped), offline=cfg.real.offline)
    real = MEMBERS(backend)
    init = [Candidate(source=BEST_FIT_SOURCE, note="best fit"),
            Candidate(source=program_source(-np.eye(10)[0], cap), note="best fit terms")]
    evaluate = S_.source_evaluator(data["train"], cap, timeout=cfg.program.timeout)
    ff_train = evaluate([Candidate(source=FIRST_FIT_SOURCE)])[0].score
    seeds, n = list(range(cfg.real.seeds)), cfg.real.calls
    solo = [S_.Router(f"only {m.name}", kind="fixed", arm=i) for i, m in enumerate(real)]
    logs1 = S_.search(evaluate, real, solo, seeds, init=init, n_calls=n,
                      key=keys["search"], context={"task": task})
    stats = member_stats(logs1, [m.name for m in real], ff_train)
    pool = real + calibrated_members(stats, cap)
    names = [m.name for m in pool]
    routers = [r for r in S_.standard_routers(len(pool), len(init) + n, names,
                                              cost_weight=cfg.cost_weight, budget=cfg.budget)
               if r.name not in {s.name for s in solo}]
    logs2 = S_.search(evaluate, pool, routers, seeds, init=init, n_calls=n,
                      key=jax_fold(keys["search"]), context={"task": task})
    logs = logs1 + logs2
    best_src = [log.genealogy.best().candidate.source for log in logs]
    def scores(sources, items):  # each distinct program once, in the jail
        distinct = list(dict.fromkeys(sources))
        res = dict(zip(distinct, evaluate_many(distinct, items, cap,
                                               timeout=cfg.program.timeout), strict=True))
        return np.array([res[s].score if res[s].ok else np.nan for s in sources])

    t = scores(best_src + [BEST_FIT_SOURCE, FIRST_FIT_SOURCE], data["test"])
    v = scores(best_src, data["val"])
    return RealRuns(
        problem=f"{prob} (real models)", objective="excess bins over L1 (%)",
        lower_is_better=True, routers=[r.name for r in solo + routers], models=names,
        cost_unit="k tokens", model_cost=[S_._price_per_call(m) for m in pool], n_seeds=len(seeds),
        best=-np.stack([log.best for log in logs]), cost=np.stack([log.cost for log in logs]),
        arms=np.stack([log.arms for log in logs]),
        failures=np.array([log.failures for log in logs]),
        test=-t[:-2], val=-v, baseline_test=-float(t[-2]), first_fit_test=-float(t[-1]),
        first_fit_train=-float(ff_train),
        init_best=-max(logs[0].genealogy.nodes[i].score for i in range(len(init))),
        best_source=best_src, stats=stats, n_calls=n, n_items=int(data["train"].shape[1]),
        improved=np.array([_improved(log) for log in logs], bool),
        calibration={m.name: dict(step=m.editor.model.step, insight=m.editor.model.insight,
                                  fail_prob=m.editor.model.fail_prob, cost=m.cost)
                     for m in pool[len(real):]},
        cache_hits=backend.hits, cache_misses=backend.misses,
        n_items_test=int(data["test"].shape[1]), cache=str(cache),
        l1_test=[l1_bound(row, cap) for row in data["test"]])


def _disjoint(data: dict[str, np.ndarray]) -> None:
    """Raise ValueError when the training, validation and test sets share an instance."""
    rows = {k: {np.asarray(r, np.float64).tobytes() for r in v} for k, v in data.items()}
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        if rows[a] & rows[b]:
            raise ValueError(f"the {a} and {b} instances overlap; they must be disjoint")


def _improved(log) -> list[bool]:
    """Per call of ``log``: the child works and scores above its best parent."""
    nodes = log.genealogy.nodes
    return [bool(nd.ok and nd.parents and nd.score > max(nodes[p].score for p in nd.parents))
            for nd in nodes if nd.step >= 0]


def shift_claim(res: RealRuns, windows: int = 2) -> Claim:
    """"The optimal LLM shifts over a run", measured on the uniform router's runs (every
    member sampled at every stage): per window of calls, each member's improvement rate
    (child above its best parent); A = the best member of the first window, B = the best
    of the last (pooled over seeds). A == B: "no" (no shift seen). Otherwise per seed
    d = (rate_A - rate_B) in the first window minus the same in the last, and the
    verdict is :func:`jaxkit.stats.superiority` of d at 90% (one-sided 5%)."""
    from jaxkit.stats import superiority

    ri = res.routers.index("uniform")
    S, M = res.n_seeds, len(res.models)
    runs = range(ri * S, (ri + 1) * S)
    arms = np.asarray(res.arms)[list(runs)]
    imp = np.asarray(res.improved)[list(runs)]
    edges = np.linspace(0, arms.shape[1], windows + 1).astype(int)

    def rates(j, w):  # (M,) improvement rate per member in window w of run j (nan: none)
        a, i = arms[j, edges[w]:edges[w + 1]], imp[j, edges[w]:edges[w + 1]]
        return np.array([i[a == m].mean() if np.any(a == m) else np.nan for m in range(M)])

    pooled = [np.nanmean(np.stack([rates(j, w) for j in range(S)]), 0)
              for w in (0, windows - 1)]
    a, b = (int(np.nanargmax(np.nan_to_num(p, nan=-1.0))) for p in pooled)
    claim = "The optimal LLM shifts over the course of a run (measured per window)"
    test = (f"uniform router's runs, {windows} windows of calls; A, B = the members with "
            "the best improvement rate in the first / last window; per seed "
            "(rate_A - rate_B) first minus last window; one-sided t at 5%")
    if not np.any(imp):
        return Claim(PAPER, claim, "no call improved on its parent", "not tested at this size",
                     test, f"{res.problem}: with no improvement by any member there is no "
                     f"best member to shift, n={S} seeds")
    if a == b:
        return Claim(PAPER, claim, f"{res.models[a]} best in the first and last window",
                     "no", test, f"{res.problem}, n={S} seeds")
    d = np.array([(rates(j, 0)[a] - rates(j, 0)[b])
                  - (rates(j, windows - 1)[a] - rates(j, windows - 1)[b]) for j in range(S)])
    v = superiority(d[np.isfinite(d)], level=0.9)
    return Claim.from_verdict(PAPER, claim, v, fmt="{:+.3g}",
                              note=f"{res.problem}: {res.models[a]} first, "
                              f"{res.models[b]} last (chosen on the same runs), n={S}")


def moved(res: RealRuns) -> bool:
    """Whether some member alone ended on the test set away from the classic heuristic
    (on some seed): otherwise every solo outcome equals it and a comparison between
    members or against Ballad is vacuous (equal by construction, not by evidence)."""
    test = np.asarray(res.test, float)
    solo = [i for i, r in enumerate(res.routers) if r.startswith("only ")]
    S = res.n_seeds
    vals = np.concatenate([test[i * S:(i + 1) * S] for i in solo])
    return bool(np.any(np.abs(vals - float(res.baseline_test)) > 1e-9))


def jax_fold(key):
    """Phase 2's search key (phase 1's folded with 2, so the runs draw afresh)."""
    import jax

    return jax.random.fold_in(key, 2)


def _shown(path: str) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def real_section(res: RealRuns) -> tuple[list[str], dict]:
    """Markdown lines on what the real members wrote, and their statistics as metrics."""
    rows = []
    for name, st in res.stats.items():
        rows.append([name, st["calls"], f"{100 * st['failure_rate']:.0f}%",
                     f"{100 * st['improve_rate']:.0f}%", f"{100 * st['beats_rate']:.0f}%",
                     f"{100 * st['new_beats_rate']:.0f}%",
                     f"{100 * st['novelty']:.0f}%", f"{100 * st['copy_rate']:.0f}%",
                     f"{st['tokens']:.2f}",
                     "; ".join(f"{k} x{v}" for k, v in st["errors"].items()) or "-"])
    cal = [[k, f"{c['fail_prob']:.2f}", f"{c['insight']:.2f}", f"{c['step']:.3f}",
            f"{c['cost']:.2f}"] for k, c in res.calibration.items()]
    sts = res.stats.values()
    n_calls = sum(st["calls"] for st in sts)
    share = lambda k: sum(st[k] * st["calls"] for st in sts) / max(n_calls, 1)  # noqa: E731
    can = (f"What a 135M model can write (phase 1, {n_calls} calls): "
           f"{100 * share('failure_rate'):.0f}% of its replies give no program that runs; "
           f"{100 * share('copy_rate'):.0f}% are a copy of a program it was shown; "
           f"{100 * share('new_beats_rate'):.0f}% are new programs that beat first fit and "
           f"{100 * share('improve_rate'):.0f}% improve on their parent.")
    lines = [
        "## Real proposers: SmolLM2-135M-Instruct writing heuristics", "",
        f"{res.problem}, {res.n_items} items per instance; phase 1: each real member "
        f"alone, {res.n_seeds} seed(s) x {res.n_calls} calls; every program ran in the "
        f"jail. Replies from the committed cache and `{_shown(res.cache)}` "
        f"({res.cache_hits} replayed, {res.cache_misses} generated or missing). "
        f"Cost: thousands of tokens. First fit "
        f"on the training instances: {res.first_fit_train:.3f}% excess over L1 (test "
        f"{res.first_fit_test:.3f}%; best fit test {res.baseline_test:.3f}%). L1 "
        f"lower bounds of the test instances: {', '.join(map(str, res.l1_test))} bins.",
        "",
        markdown_table(["member", "calls", "failed", "improved on parent",
                        "beat first fit", "beat it, not a copy", "novel", "copied a parent",
                        "k tokens / call",
                        "failure reasons"],
                       rows), "",
        can + " Failed: no usable `priority` in the reply, or its program failed in the "
        "jail.", "",
        "Simulated members calibrated from these statistics (fail = failure rate, insight "
        "= improvement rate, step = 0.02 + 0.3 x novelty, price = tokens per call):", "",
        markdown_table(["member", "fail", "insight", "step", "price"], cal), ""]
    return lines, dict(stats=res.stats, calibration=res.calibration,
                       first_fit_test=res.first_fit_test,
                       cache_hits=res.cache_hits, cache_misses=res.cache_misses,
                       nan_tests=int(np.sum(~np.isfinite(np.asarray(res.test, float)))),
                       ok=bool(math.isfinite(res.baseline_test)))


def run_claims(results, pooled, real, cfg) -> list:
    """The claims. With the real-proposer stage, its problem joins each paper claim's
    family (Holm over the problems), the costlier-models claim is tested on the real pool
    (the SmolLM2 configurations and the simulated members calibrated from them, priced by
    tokens) and the shift of the best model is measured per window
    (:func:`shift_claim`) instead of the "not tested" rows. When no real member alone
    moved off the classic heuristic (:func:`moved`), the real problem stays out of the
    families (its rows would be vacuous "matches") and the costlier row is "not tested at
    this size"."""
    from . import report, report_pools  # report_pools imports report, as this module does

    if real is None:
        return report.claims(results, cfg) + report_pools.pool_claims(pooled, cfg)

    def starts(c, text):
        return c.claim.startswith(text)

    cv, cm, ct, cn = report.costlier_verdict([real], cfg)
    sim = report.costlier_verdict(results, cfg) if results else None
    informative = moved(real)
    if not informative:  # every member alone ended at the classic heuristic
        cv, cn = "not tested at this size", (
            "no real-pool member alone moved off the classic heuristic on the test set, "
            "so every comparison is equal by construction; " + cn)
    out = []
    family = results + [real] if informative or not results else results
    for c in report.claims(family, cfg):
        if starts(c, "The optimal LLM shifts"):
            continue
        if c.kind == "paper" and starts(c, "Across problems there is no consistent"):
            c = Claim(c.paper, c.claim, cm, cv, ct, "measured on the real pool only (the "
                      "simulated pools' price-quality relation is an input); " + cn)
        elif starts(c, "In the hand-made simulated pool"):
            if sim is None:
                continue
            c = Claim(c.paper, c.claim, sim[1], sim[0], sim[2], sim[3], kind=c.kind)
        out.append(c)
    if not informative and results:  # its setup and extension rows, outside the families
        out += [c for c in report.claims([real], cfg, simulated=False) if c.kind != "paper"]
    return out + [shift_claim(real)] + report_pools.pool_claims(pooled, cfg)
