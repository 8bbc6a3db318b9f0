"""Every run's best heuristic scored again on standard instances that ship with jaxkit.

The search trains on generated instances (FunSearch's generators: OR-Library's u-class
rule and the Weibull 5k rule, LLM4AD's uniform TSP); the heuristic it found is then run,
unchanged, on published instances with best known solutions
(:data:`jaxkit.ballad.instances.STANDARD`): OR-Library's Falkenauer u120 or u500 for
``binpacking_or`` (the set of the test size) and TSPLIB's six 100-city EUC_2D instances
for ``tsp``. Reported per router as the mean over seeds with its 95% t interval and the
gap to the best known value:

* bin packing (objective ``100 (bins - L1) / L1``): the gap in percentage points;
* TSP (tour length in the unit-square scale): ``100 (length / optimum - 1)`` percent.

A check that what the generated instances taught carries over to the literature's
instances; it is a table, not a claim (the claims stay on the instances the protocol
fixed before the run).
"""

from __future__ import annotations

import numpy as np

from jaxkit.report import markdown_table
from jaxkit.stats import t_interval

from . import problems
from .compare import _test_scores
from .config import Config
from .instances import instance_optimum, load_instances
from .results import RouterRuns, StandardScores

__all__ = ["STANDARD_SETS", "standard_scores", "standard_section"]

#: problem -> (standard set at the quick test size, at the full test size)
STANDARD_SETS = {"binpacking_or": ("standard:or-u120", "standard:or-u500"),
                 "tsp": ("standard:tsplib-100", "standard:tsplib-100")}


def standard_scores(res: RouterRuns, cfg: Config) -> StandardScores | None:
    """Scores of ``res``'s best heuristics (and the classic one) on its problem's standard
    set, or None for a problem without one.

    Args:
        res: a result of :func:`jaxkit.ballad.compare.search_problem` (``best_theta`` per
            run, routers outer, seeds inner).
        cfg: the configuration (``full_test`` picks the set's size).

    Returns:
        ``set`` (its name), ``optimum`` (mean best known objective), ``values`` (routers x
        seeds, in the problem's own direction), ``baseline`` (the classic heuristic) and
        ``n_instances``.
    """
    sets = STANDARD_SETS.get(res.problem)
    if sets is None or res.best_theta is None:
        return None
    spec = sets[1 if cfg.full_test else 0]
    _, inst = load_instances(spec, res.problem)
    size = next(iter(inst.values())).shape[1]
    prob = problems.make(res.problem, size)
    thetas = np.vstack([np.asarray(res.best_theta), np.asarray(prob.baseline)[None]])
    sign = -1.0 if prob.lower_is_better_objective else 1.0
    scored = sign * np.asarray(_test_scores(prob.score, thetas, inst), dtype=np.float64)
    n_r, n_s = len(res.routers), res.n_seeds
    return StandardScores(set=spec, optimum=instance_optimum(spec),
                          values=scored[:-1].reshape(n_r, n_s), baseline=float(scored[-1]),
                          n_instances=len(next(iter(inst.values()))), problem=res.problem,
                          routers=list(res.routers))


def _gap(value: float, opt: float, problem: str) -> float:
    return value - opt if problem.startswith("binpacking") else 100.0 * (value / opt - 1.0)


def standard_section(results: list[RouterRuns], cfg: Config) -> tuple[list[str], dict]:
    """The report section (markdown lines) and its metrics, one table per problem that
    has a standard set; empty when none has."""
    md, metrics = [], {}
    for res in results:
        sc = standard_scores(res, cfg)
        if sc is None:
            continue
        prob, opt = sc.problem, sc.optimum
        unit = "points" if prob.startswith("binpacking") else "%"
        rows = [["classic heuristic", f"{sc.baseline:.4g}",
                 f"{_gap(sc.baseline, opt, prob):.3g}"]]
        per = {}
        for name, vals in zip(sc.routers, sc.values, strict=True):
            m, h = t_interval(vals)
            per[name] = float(m)
            rows.append([name, f"{m:.4g}" + ("" if not np.isfinite(h) else f" ± {h:.2g}"),
                         f"{_gap(m, opt, prob):.3g}"])
        md += [f"### {prob} on `{sc.set}` ({sc.n_instances} published instances)", "",
               f"Each run's best heuristic (searched on generated instances) on the "
               f"published instances; best known mean objective {opt:.4g}; gap to it in "
               f"{unit} (lower is better).", "",
               markdown_table(["router", "objective (mean ± 95% t over seeds)",
                               f"gap to best known ({unit})"], rows), ""]
        metrics[prob] = dict(set=sc.set, optimum=opt, baseline=sc.baseline, routers=per)
    if md:
        md = ["## On standard instances", "", __doc__.split("\n\n")[1].replace("\n", " "),
              ""] + md
    return md, metrics
