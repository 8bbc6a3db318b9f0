"""Your own hypotheses and candidate experiments as a JSON file: the belief and the next
experiment to run.

``jaxkit run contrastive --set data=FILE.json`` reads a MECE set of explanations, the
outcome set, every candidate experiment's cost and likelihood table, and the outcomes
already observed; it reports the posterior and ranks the experiments not yet run by
expected information gain per cost (:func:`jaxkit.kernels.belief.eig_per_cost`, the
contrastive score of the paper), best first. Format::

    {
      "hypotheses": ["linear", "sigmoid", "threshold"],
      "prior": [0.4, 0.4, 0.2],
      "outcomes": ["low", "mid", "high"],
      "experiments": [
        {"name": "dose 1 uM", "cost": 1.0,
         "likelihood": {"linear": [0.7, 0.2, 0.1], "sigmoid": [0.3, 0.4, 0.3],
                        "threshold": [0.9, 0.1, 0.0]}},
        {"name": "dose 10 uM", "cost": 2.5, "likelihood": [[...], [...], [...]]}
      ],
      "observed": [{"experiment": "dose 1 uM", "outcome": "low"}]
    }

``prior`` (optional, default uniform) is normalised; ``likelihood`` gives, per
hypothesis (by name, or as rows in the order of ``hypotheses``), the probability of each
outcome, summing to 1 (within 1e-3; then normalised). Outcomes of different
experiments must be independent given the hypothesis (each experiment its own
replicate), as in :mod:`jaxkit.contrastive.user`, whose Python API takes numpyro models
instead. Errors name the file and the experiment or hypothesis at fault.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxkit.io import DataError
from jaxkit.kernels.belief.eig import eig_per_cost
from jaxkit.kernels.belief.posterior import posterior
from jaxkit.report import markdown_table

__all__ = ["Hypotheses", "read_hypotheses", "rank_file", "markdown"]


class Hypotheses(NamedTuple):
    """A parsed hypotheses file: names, outcome labels, experiment names and costs, the
    probability tables ``(X, K, Y)``, the prior ``(K,)`` and the observed
    ``(experiment index, outcome index)`` pairs."""

    path: Path
    hypotheses: list[str]
    outcomes: list[str]
    experiments: list[str]
    costs: np.ndarray
    table: np.ndarray
    prior: np.ndarray
    observed: list[tuple[int, int]]


def _probs(path, where: str, v, n: int, what: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{path}, {where}: {what} must be a list of {n} numbers") from None
    if a.shape != (n,) or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise DataError(f"{path}, {where}: {what} must be {n} non-negative numbers; got "
                        f"{v!r}")
    if abs(a.sum() - 1.0) > 1e-3:
        raise DataError(f"{path}, {where}: {what} must sum to 1; got {a.sum():.6g}")
    return a / a.sum()


def read_hypotheses(path: str | Path) -> Hypotheses:
    """Parse the file (module docstring).

    Raises:
        DataError: naming the file and the experiment / hypothesis at fault.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise DataError(f"{path}: expected an object with hypotheses, outcomes, experiments")
    for f in ("hypotheses", "outcomes", "experiments"):
        if not isinstance(doc.get(f), list) or len(doc[f]) < (1 if f == "experiments" else 2):
            raise DataError(f"{path}: {f!r} must be a list of at least "
                            f"{1 if f == 'experiments' else 2}")
    hyp = [str(h) for h in doc["hypotheses"]]
    outs = [str(o) for o in doc["outcomes"]]
    if len(set(hyp)) != len(hyp) or len(set(outs)) != len(outs):
        raise DataError(f"{path}: hypotheses and outcomes must have distinct names")
    K, Y = len(hyp), len(outs)
    prior = (np.full(K, 1.0 / K) if doc.get("prior") is None
             else _probs(path, "prior", doc["prior"], K, "the prior"))
    names, costs, tables = [], [], []
    for i, e in enumerate(doc["experiments"]):
        where = f"experiment {i}"
        if not isinstance(e, dict) or "likelihood" not in e:
            raise DataError(f"{path}, {where}: needs 'name', 'cost' and 'likelihood'")
        name = str(e.get("name", f"experiment {i}"))
        where = f"experiment {i} ({name!r})"
        try:
            c = float(e.get("cost", 1.0))
        except (TypeError, ValueError):
            c = float("nan")
        if not (c > 0 and np.isfinite(c)):
            raise DataError(f"{path}, {where}: 'cost' must be a positive number; got "
                            f"{e.get('cost')!r}")
        lik = e["likelihood"]
        if isinstance(lik, dict):
            missing = [h for h in hyp if h not in lik]
            if missing:
                raise DataError(f"{path}, {where}: no likelihood for hypothesis "
                                f"{missing[0]!r}")
            rows = [lik[h] for h in hyp]
        elif isinstance(lik, list) and len(lik) == K:
            rows = lik
        else:
            raise DataError(f"{path}, {where}: 'likelihood' must map each of the {K} "
                            "hypotheses to its outcome probabilities")
        tables.append([_probs(path, f"{where}, hypothesis {h!r}", r, Y, "the likelihood")
                       for h, r in zip(hyp, rows, strict=True)])
        names.append(name)
        costs.append(c)
    if len(set(names)) != len(names):
        raise DataError(f"{path}: experiment names must be distinct")
    observed = []
    for j, ob in enumerate(doc.get("observed") or []):
        ex, y = (ob.get("experiment"), ob.get("outcome")) if isinstance(ob, dict) else (None,
                                                                                          None)
        if ex not in names or y not in outs:
            raise DataError(f"{path}, observed {j}: needs an 'experiment' of {names} and an "
                            f"'outcome' of {outs}; got {ob!r}")
        observed.append((names.index(ex), outs.index(y)))
    return Hypotheses(path, hyp, outs, names, np.asarray(costs), np.asarray(tables), prior,
                      observed)


def rank_file(h: Hypotheses) -> dict:
    """The posterior after the observed outcomes, and the experiments not yet run ranked
    by EIG per cost.

    Returns:
        ``posterior`` ``(K,)``, ``order`` (unrun experiment indices, best first),
        ``eig`` and ``eig_per_cost`` ``(X,)`` (``-inf`` / NaN for those already run),
        ``impossible`` (True when an observed outcome has probability 0 under every
        hypothesis with prior mass: the set is not exhaustive).
    """
    with np.errstate(divide="ignore"):
        lp = np.log(h.prior)
        ll = np.log(h.table)
    cur = jnp.asarray(lp)
    used = np.zeros(len(h.experiments), bool)
    impossible = False
    for i, y in h.observed:
        res = posterior(cur, jnp.asarray(ll[i, :, y]))
        if not bool(res.finite):
            impossible = True
            break
        cur = res.log_post
        used[i] = True
    # the EIG from the kernel at unit cost, divided by the cost here in float64: a cost
    # beyond float32's range (1e308) would overflow to inf on the device, and EIG = score *
    # cost would then read 0 (or inf * 0)
    gain = np.asarray(eig_per_cost(cur, jnp.asarray(ll), jnp.ones(len(h.costs)), jnp.inf,
                                   jnp.asarray(used)), np.float64)
    run = np.isfinite(gain)
    gain = np.where(run, gain, np.nan)
    score = np.where(run, gain / np.asarray(h.costs, np.float64), -np.inf)
    order = [int(i) for i in np.argsort(-score, kind="stable") if run[i]]
    return dict(posterior=np.exp(np.asarray(cur)), order=order, eig_per_cost=score, eig=gain,
                impossible=impossible)


def markdown(h: Hypotheses, r: dict) -> str:
    """The report section of the hypotheses file."""
    lines = [f"Your hypotheses: `{h.path}`: {len(h.hypotheses)} explanations, "
             f"{len(h.experiments)} candidate experiments, {len(h.observed)} outcome(s) "
             "observed.", ""]
    if r["impossible"]:
        lines += ["**An observed outcome has probability 0 under every explanation: the "
                  "set is not exhaustive (add an explanation).**", ""]
    lines += [markdown_table(["hypothesis", "posterior"],
                             [[n, float(p)] for n, p in zip(h.hypotheses, r["posterior"],
                                                            strict=True)]), "",
              "Next experiments, best first (expected information gain per cost, in nats):",
              "", markdown_table(["rank", "experiment", "cost", "EIG", "EIG / cost"],
                                 [[k + 1, h.experiments[i], float(h.costs[i]),
                                   float(r["eig"][i]), float(r["eig_per_cost"][i])]
                                  for k, i in enumerate(r["order"])])]
    return "\n".join(lines)
