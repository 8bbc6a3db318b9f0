"""The routing comparison with real models: ``jaxkit run ballad --set pool=http``.

The proposers are OpenAI-compatible endpoints (:class:`jaxkit.ballad.llm.OpenAIChat`,
``http.models`` as for :func:`jaxkit.ballad.llm.pool_from_env`: ``"model:price_in:
price_out,..."``, dollars per million tokens) that edit Python bin-packing heuristics;
every child runs in the sandbox (:mod:`jaxkit.jail.sandbox`) on Weibull instances
(capacity 100) and the best program of each run is scored on held-out instances. Every
response is cached on disk (``http.cache``, default ``<out>/llm-cache``), so a run can
be replayed call for call with no server (``http.offline=true``). The result has the
shape of :func:`jaxkit.ballad.compare.search_problem`'s, so the same report and claims
apply; the cost of a call is the tokens the server reports, priced per model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from jaxkit.stats import as_generator

from . import search as S_
from .config import Config
from .llm import Candidate, pool_from_env
from .program import program_source
from .results import RouterRuns

__all__ = ["search_http", "CAPACITY"]

CAPACITY = 100.0


def search_http(cfg: Config, keys: dict[str, Any], out_dir: Path, *, track=None) -> RouterRuns:
    """Every router x ``cfg.http.seeds`` seeds over the HTTP pool; see the module
    docstring. ``keys``: ``train`` / ``val`` / ``test`` (the instances; the best single
    model is chosen on ``val``) and ``search``."""
    from jaxkit.jail.sandbox import evaluate_many

    from .discover import BEST_FIT_SOURCE, weibull_items

    cache = Path(cfg.http.cache) if cfg.http.cache else Path(out_dir) / "llm-cache"
    pool = pool_from_env(cfg.http.models or None, base_url=cfg.http.base_url or None,
                         cache=cache, offline=cfg.http.offline, timeout=cfg.http.timeout)
    seed_of = lambda k: int(as_generator(k).integers(2**31 - 1))
    n_items = cfg.http.items
    train = weibull_items(seed_of(keys["train"]), cfg.train_instances, n_items)
    test = weibull_items(seed_of(keys["test"]), cfg.test_instances, n_items)
    val = weibull_items(seed_of(keys["val"]), cfg.val_instances, n_items)
    init = [Candidate(source=BEST_FIT_SOURCE, note="best fit"),
            Candidate(source=program_source(-np.eye(10)[0], CAPACITY), note="best fit terms")]
    names = [m.name for m in pool]
    routers = S_.standard_routers(len(pool), len(init) + cfg.http.calls, names, ablations=(),
                                  cost_weight=cfg.cost_weight, budget=cfg.budget)
    seeds = list(range(cfg.http.seeds))
    bar = (iter(track(range(cfg.http.calls), "ballad http", total=cfg.http.calls))
           if track else None)
    logs = S_.search(S_.source_evaluator(train, CAPACITY), pool, routers, seeds, init=init,
                     n_calls=cfg.http.calls, key=keys["search"],
                     progress=(lambda t: next(bar, None)) if bar else None)
    if bar is not None:
        for _ in bar:
            pass
    best_src = [log.genealogy.best().candidate.source for log in logs]
    scored = evaluate_many(best_src + [BEST_FIT_SOURCE], test, CAPACITY)
    test_scores = np.array([r.score if r.ok else np.nan for r in scored])
    val_scores = np.array([r.score if r.ok else np.nan
                           for r in evaluate_many(best_src, val, CAPACITY)])
    return RouterRuns(
        problem="binpacking_weibull (HTTP models)", objective="excess bins over L1 (%)",
        lower_is_better=True, routers=[r.name for r in routers], models=names,
        model_cost=[S_._price_per_call(m) for m in pool], n_seeds=len(seeds),
        best=-np.stack([log.best for log in logs]), cost=np.stack([log.cost for log in logs]),
        arms=np.stack([log.arms for log in logs]),
        failures=np.array([log.failures for log in logs]),
        test=-test_scores[:-1], val=-val_scores, baseline_test=-float(test_scores[-1]),
        init_best=-max(logs[0].genealogy.nodes[i].score for i in range(len(init))),
        best_source=best_src, cache_hits=sum(m.hits for m in pool),
        cache_misses=sum(m.misses for m in pool))
