"""Simulate and time one CPU bandit library on pre-drawn reward tables (peer worker).

Runs inside an isolated virtual environment made by ``benchmarks/bench_bandit.py``
(``.peer-venv-mabwiser`` with mabwiser 2.7.4, ``.peer-venv-smpybandits`` with
SMPyBandits 0.9.7 + scipy 1.13.1), so it imports nothing from jaxkit. Usage::

    python bandit_worker.py DATA.npz OUT.json --policy ucb1|ducb [--variants stock,matched]
    python bandit_worker.py --arms SCHEDULE.json OUT.json

``--arms`` (for ``tests/kernels/test_bandit_parity.py``): one MABWiser ``UCB1(alpha)``
bandit driven through a schedule of ``add_arm`` / ``remove_arm`` calls. ``SCHEDULE.json``
holds ``alpha``, ``initial`` (the starting arm ids), ``table`` (T x K rewards) and
``events`` (``[step, "add" | "remove", arm]``, applied before that step's choice). At
each step the bandit plays the lowest active arm it has not been trained on since it
(re)entered (``partial_fit`` on it: jaxkit's "+inf for a fresh arm", which MABWiser
leaves to the user since its fresh arms have expectation 0), else ``predict()``.
``OUT.json`` gets the arm sequence and the final ``predict_expectations()``. With
``tables`` (P x T x K) instead of ``table``, every run is simulated and timed (the first
twice: an untimed warm-up), and ``OUT.json`` gets the P arm sequences and the
run times (``run_times_s``, warm-up excluded).

``DATA.npz`` holds ``table`` (P, T, K) uint8: the reward of every arm at every step of
each of P runs (the same table jaxkit and the NumPy baseline get), and the hyper-parameters
``alpha``, ``gamma``. Each run is one fresh bandit object driven step by step
(``choose`` -> reward ``table[run, t, arm]`` -> ``update``), exactly as a user of the
library simulates; every run is timed on its own after one untimed warm-up run. The arm
sequences and per-run times go to ``OUT.json``.

Policies (hyper-parameters mapped so that the index formula is jaxkit's):

* ``ucb1`` -- MABWiser ``MAB(arms, LearningPolicy.UCB1(alpha))``; its index is
  ``mean + alpha * sqrt(2 ln n / n_k)`` (``mabwiser/ucb.py::_get_ucb``), jaxkit's UCB1.
  MABWiser gives a never-pulled arm expectation 0 (not +inf), so a cold-started UCB1
  would pull arm 0 forever; as in the UCB1 paper (play each arm once) the bandit is
  started with ``fit`` on the first K steps, arm k at step k, which is exactly what
  jaxkit's "+inf for never-pulled arms, ties to the lowest arm" does. Its ``argmax``
  returns the first maximal arm (lowest), as jaxkit. Variant ``stock`` only.
* ``ducb`` -- SMPyBandits ``DiscountedUCB(K, alpha=4 * alpha, gamma)``; its index is
  ``X/N + sqrt(alpha_s ln(sum N) / (2 N))``, equal to jaxkit's
  ``X/N + sqrt(2 alpha ln(sum N) / N)`` when ``alpha_s = 4 alpha``. Rewards are used as
  given (``lower=0, amplitude=1``). Variants:

  - ``stock``: the class as shipped. It differs from jaxkit's D-UCB (Garivier & Moulines)
    in three ways, so its arm sequences are *not* expected to match: (1)
    ``discounted_pulls`` is an integer array, so ``gamma * N + 1`` is truncated at every
    update; (2) an arm's counts are discounted lazily, by ``gamma ** (1 + delay)`` when it
    is pulled again, so the index uses stale (undiscounted) ``N_k, X_k`` for arms not pulled
    recently and ``sum N`` mixes them; (3) ties (e.g. the initial +inf of never-pulled
    arms) are broken uniformly at random (``IndexPolicy.choice``; the worker seeds
    ``np.random`` with the run number).
  - ``matched``: a 3-method subclass that keeps the class's formula but uses float counts
    discounted for all arms at every step, "+inf only if never pulled", and the lowest
    arm on ties -- i.e. jaxkit's definition; it checks the alpha mapping (its arms should
    equal jaxkit's) and shows what the library's per-step overhead costs with it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings

import numpy as np
from _common import versions as peer_versions

# ------------------------------------------------------------------------ MABWiser UCB1


def run_mabwiser_ucb1(table: np.ndarray, alpha: float) -> np.ndarray:
    """One MABWiser UCB1 bandit on a (T, K) table; returns the arm sequence (T,)."""
    from mabwiser.mab import MAB, LearningPolicy

    n_steps, k = table.shape
    arms = list(range(k))
    out = np.empty(n_steps, np.int32)
    mab = MAB(arms=arms, learning_policy=LearningPolicy.UCB1(alpha=alpha), n_jobs=1)
    first = np.arange(min(k, n_steps))  # one pull per arm: arm k at step k
    mab.fit(decisions=first, rewards=table[first, first].astype(float))
    out[first] = first
    for t in range(first.size, n_steps):
        a = mab.predict()
        out[t] = a
        mab.partial_fit([a], [float(table[t, a])])
    return out


# ------------------------------------------------------------------ SMPyBandits D-UCB


def _smpy_classes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from SMPyBandits.Policies.BasePolicy import BasePolicy
        from SMPyBandits.Policies.DiscountedUCB import DiscountedUCB

    class MatchedDiscountedUCB(DiscountedUCB):
        """SMPyBandits' D-UCB index with jaxkit's (Garivier & Moulines') bookkeeping."""

        def __init__(self, nbArms, *args, **kwargs):
            super().__init__(nbArms, *args, **kwargs)
            self.discounted_pulls = np.zeros(nbArms)  # float, not int

        def getReward(self, arm, reward):
            BasePolicy.getReward(self, arm, reward)  # t, pulls, rewards
            reward = (reward - self.lower) / self.amplitude
            self.discounted_pulls *= self.gamma  # every arm decays every step
            self.discounted_rewards *= self.gamma
            self.discounted_pulls[arm] += 1
            self.discounted_rewards[arm] += reward

        def computeAllIndex(self):
            n_t_gamma = np.sum(self.discounted_pulls)
            with np.errstate(divide="ignore", invalid="ignore"):
                idx = (self.discounted_rewards / self.discounted_pulls) + np.sqrt(
                    (self.alpha * np.log(n_t_gamma)) / (2 * self.discounted_pulls))
            idx[self.pulls < 1] = np.inf  # never pulled
            self.index[:] = idx

        def choice(self):
            self.computeAllIndex()
            return int(np.argmax(self.index))  # lowest arm on ties

    return DiscountedUCB, MatchedDiscountedUCB


def run_smpy_ducb(table: np.ndarray, alpha: float, gamma: float, variant: str,
                  seed: int) -> np.ndarray:
    """One SMPyBandits D-UCB bandit on a (T, K) table; returns the arm sequence (T,)."""
    stock, matched = _smpy_classes()
    cls = stock if variant == "stock" else matched
    n_steps, k = table.shape
    np.random.seed(seed)  # IndexPolicy.choice breaks ties with np.random
    pol = cls(k, alpha=4.0 * alpha, gamma=gamma)
    pol.startGame()
    out = np.empty(n_steps, np.int32)
    for t in range(n_steps):
        a = int(pol.choice())
        out[t] = a
        pol.getReward(a, float(table[t, a]))
    return out


# ------------------------------------------------------------------------------ main


def run_mabwiser_arms(schedule: dict) -> dict:
    """MABWiser UCB1 through ``schedule`` (see the module docstring)."""
    from mabwiser.mab import MAB, LearningPolicy

    table = np.asarray(schedule["table"], float)
    events: dict = {}
    for step, op, arm in schedule["events"]:
        events.setdefault(int(step), []).append((op, int(arm)))
    active = [int(a) for a in schedule["initial"]]
    fresh = set(active)
    mab = MAB(arms=list(active), learning_policy=LearningPolicy.UCB1(alpha=schedule["alpha"]),
              n_jobs=1)
    seq, fitted = [], False
    for t in range(table.shape[0]):
        for op, arm in events.get(t, []):
            if op == "add":
                mab.add_arm(arm)
                active.append(arm)
                fresh.add(arm)
            else:
                mab.remove_arm(arm)
                active.remove(arm)
                fresh.discard(arm)
        arm = min(fresh) if fresh else int(mab.predict())
        fresh.discard(arm)
        reward = [float(table[t, arm])]
        if fitted:
            mab.partial_fit([arm], reward)
        else:
            mab.fit([arm], reward)
            fitted = True
        seq.append(arm)
    exp = {int(k): float(v) for k, v in mab.predict_expectations().items()}
    return {"arms": seq, "expectations": exp,
            "versions": peer_versions(("mabwiser", "numpy"))}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "--arms":
        with open(argv[1]) as f:
            sched = json.load(f)
        if "tables" in sched:  # several runs (bench_bandit.py "arms"), each timed
            runs, times = [], []
            for n, table in enumerate(sched["tables"]):
                t0 = time.perf_counter()
                runs.append(run_mabwiser_arms({**sched, "table": table})["arms"])
                if n:  # the first run is the untimed warm-up (imports)
                    times.append(time.perf_counter() - t0)
            res = {"arms": runs, "run_times_s": times,
                   "versions": peer_versions(("mabwiser", "numpy"))}
        else:
            res = run_mabwiser_arms(sched)
        with open(argv[2], "w") as f:
            json.dump(res, f)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--policy", choices=("ucb1", "ducb"), required=True)
    p.add_argument("--variants", default="stock")
    a = p.parse_args(argv)

    d = np.load(a.data)
    table = np.asarray(d["table"])
    alpha, gamma = float(d["alpha"]), float(d["gamma"])
    n_runs = table.shape[0]
    if a.policy == "ucb1":
        versions = peer_versions(("mabwiser", "numpy", "joblib"))
    else:
        versions = peer_versions(("SMPyBandits", "numpy", "scipy"))
    out = {"versions": versions, "python": sys.version.split()[0],
           "platform": platform.platform(), "policy": a.policy, "results": {}}
    for variant in a.variants.split(","):
        if a.policy == "ucb1":
            if variant != "stock":
                raise SystemExit(f"ucb1 has no variant {variant!r}")

            def one(i):
                return run_mabwiser_ucb1(table[i], alpha)
        else:
            def one(i, variant=variant):
                return run_smpy_ducb(table[i], alpha, gamma, variant, seed=i)
        one(0)  # warm-up: imports, caches
        times, arms = [], []
        for i in range(n_runs):
            t0 = time.perf_counter()
            seq = one(i)
            times.append(time.perf_counter() - t0)
            arms.append(seq.tolist())
        out["results"][variant] = {"run_times_s": times, "arms": arms}
        steps = n_runs * table.shape[1]
        print(f"{a.policy} {variant}: {n_runs} runs x {table.shape[1]} steps in "
              f"{sum(times):.2f} s ({steps / sum(times):,.0f} steps/s)", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
