"""The program-space experiment of ``jaxkit run ballad``: source-editing proposers whose
every candidate runs in the jail.

The pipeline's other experiments search in parameter space (a proposer edits a
coefficient vector that a jitted JAX heuristic scores). Here each proposer of the
hand-made offline pool (:func:`jaxkit.ballad.pools.default_pool`) is wrapped as a
:class:`~jaxkit.ballad.program.SourceEditor`: it reads its parents' Python source, edits
the terms and writes a child program, with probability ``program.bug_prob`` a buggy one
(a wrong shape, an exception, an endless loop). Every child is run by
:func:`jaxkit.jail.sandbox.evaluate_many` (separate process, resource limits, time
limit, and the namespace / seccomp jail where the kernel allows it) on Weibull
bin-packing instances (capacity 100); the best program of each run is run again in the
jail on held-out instances, beside the hand-written best fit. Reported: per router the
best training score, the test objective of its best program, the failed nodes (the
jail's refusals and the proposers' own failures), cost and routing shares. This
exercises the source path end to end; it is far too small to test a claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit.report import markdown_table
from jaxkit.stats import as_generator

from . import search as S_
from .config import Config
from .llm import Candidate
from .pools import default_pool
from .program import SourceEditor, program_source
from .results import ProgramRuns

__all__ = ["search_programs", "program_section", "CAPACITY", "ROUTERS"]

CAPACITY = 100.0
ROUTERS = ("only frontier", "uniform", "ballad", "ballad-cost")


def search_programs(cfg: Config, keys: dict[str, Any]) -> ProgramRuns:
    """Run :data:`ROUTERS` x ``cfg.program.seeds`` seeds for ``cfg.program.calls`` calls
    each in program space (module docstring). ``keys``: ``train`` / ``test`` (the
    instances) and ``search``.

    Returns:
        A dict of plain values (router names, per-run best training score, test
        objective of the best program, failures with their reasons, cost, shares, the
        best-fit baseline and the sandbox's isolation level).
    """
    from jaxkit.jail.sandbox import evaluate_many, isolation_level

    from .discover import BEST_FIT_SOURCE, weibull_items

    seed_of = lambda k: int(as_generator(k).integers(2**31 - 1))  # noqa: E731
    train = weibull_items(seed_of(keys["train"]), cfg.train_instances, cfg.program.items)
    test = weibull_items(seed_of(keys["test"]), cfg.test_instances, cfg.program.items)
    pool = [SourceEditor(m, CAPACITY, bug_prob=cfg.program.bug_prob) for m in default_pool()]
    names = [m.name for m in pool]
    init = [Candidate(source=program_source(-np.eye(10)[0], CAPACITY), note="best fit"),
            Candidate(source=program_source(np.r_[-1.0, 0.5, np.zeros(8)], CAPACITY),
                      note="best fit + s^2")]
    routers = [r for r in S_.standard_routers(len(pool), len(init) + cfg.program.calls,
                                              names, ablations=(),
                                              cost_weight=cfg.cost_weight, budget=cfg.budget)
               if r.name in ROUTERS]
    seeds = list(range(cfg.program.seeds))
    evaluate = S_.source_evaluator(train, CAPACITY, timeout=cfg.program.timeout,
                                   max_workers=2)
    logs = S_.search(evaluate, pool, routers, seeds, init=init, n_calls=cfg.program.calls,
                     key=keys["search"])
    best_src = [log.genealogy.best().candidate.source for log in logs]
    scored = evaluate_many(best_src + [BEST_FIT_SOURCE], test, CAPACITY,
                           timeout=cfg.program.timeout, max_workers=2)
    test_scores = [r.score if r.ok else float("nan") for r in scored]
    errors = [[n.error for n in log.genealogy.nodes[len(init):] if not n.ok] for log in logs]
    return ProgramRuns(
        routers=[r.name for r in routers], models=names, n_seeds=len(seeds),
        isolation=isolation_level(), n_calls=cfg.program.calls, n_items=cfg.program.items,
        train_best=[-float(log.best[-1]) for log in logs],
        test=[-float(s) for s in test_scores[:-1]], baseline_test=-float(test_scores[-1]),
        edits_ok=[int(sum(n.ok for n in log.genealogy.nodes[len(init):])) for log in logs],
        errors=errors, cost=[float(log.cost[-1]) for log in logs],
        arms=[np.asarray(log.arms).tolist() for log in logs], best_source=best_src)


def _kind(error: str) -> str:
    e = error.lower()
    if "timeout" in e or "time limit" in e:
        return "time limit"
    if "no parsable code" in e or "cannot read" in e:
        return "proposer failure"
    return "refused by the jail"


def program_section(res: ProgramRuns) -> tuple[list[str], dict]:
    """Markdown lines and metrics rows of :func:`search_programs`' result."""
    S, M = res.n_seeds, len(res.models)
    rows, metrics = [], {}
    for ri, name in enumerate(res.routers):
        runs = range(ri * S, (ri + 1) * S)
        errs = [e for j in runs for e in res.errors[j]]
        kinds = {k: sum(_kind(e) == k for e in errs) for k in
                 ("refused by the jail", "time limit", "proposer failure")}
        arms = np.concatenate([np.asarray(res.arms[j], int) for j in runs])
        share = np.bincount(arms, minlength=M) / max(arms.size, 1)
        row = dict(train=float(np.mean([res.train_best[j] for j in runs])),
                   test=float(np.nanmean([res.test[j] for j in runs])),
                   ok=int(sum(res.edits_ok[j] for j in runs)), failed=kinds,
                   cost=float(np.mean([res.cost[j] for j in runs])), share=share.tolist())
        metrics[name] = row
        rows.append([name, row["train"], row["test"], row["ok"],
                     kinds["refused by the jail"], kinds["time limit"],
                     kinds["proposer failure"], row["cost"],
                     " / ".join(f"{s:.0%}" for s in share)])
    lines = [
        "## Program space: source-editing proposers through the jail", "",
        f"Each proposer of the hand-made pool edits Python source; every child ran in the "
        f"sandbox (isolation: {res.isolation}) on {res.n_items}-item Weibull "
        f"instances, {res.n_calls} calls x {S} seed(s) per router; the best program "
        f"of each run ran again in the jail on held-out instances. Objective: excess bins "
        f"over L1 (%), lower is better; hand-written best fit on the same test instances: "
        f"{res.baseline_test:.3f}. Shares in the order {' / '.join(res.models)}. "
        "An end-to-end check of the source path, too small to test a claim.", "",
        markdown_table(["router", "train best", "test (best program)", "edits scored",
                        "refused by the jail", "time limit", "proposer failures",
                        "cost ($)", "share"], rows), ""]
    return lines, dict(rows=metrics, baseline_test=res.baseline_test,
                       isolation=res.isolation)
