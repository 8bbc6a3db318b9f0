"""The CTMC unmasking sampler against its definition, exactly, on a tiny vocabulary.

Two positions, three tokens, a known joint target ``p1``. With the exact posterior of
the masking path (``p(x1^i | x_t)``: ``p1`` conditioned on the unmasked positions), the
Euler sampler's output law is computable by enumeration: at step ``k`` every masked
position unmasks independently with probability ``min(1, h kappa'/(1 - kappa))`` (1 at
the last step), drawing from the posterior given the state *before* the step, so two
positions unmasked in the same step are drawn from the product of their marginals.
The empirical law of many samples must match that enumeration; with many steps it
tends to ``p1`` itself (simultaneous jumps vanish), with one step it is the product of
the marginals.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import flow_discrete as fd

V, MASK = 3, 3
P1 = np.array([[0.30, 0.02, 0.08], [0.05, 0.25, 0.05], [0.10, 0.05, 0.10]])


def posterior(x):
    """Exact ``p(x1^i | x)`` for one state ``x`` (2,) -> (2, V)."""
    out = np.zeros((2, V))
    for i in range(2):
        j = 1 - i
        row = P1 if i == 0 else P1.T  # row[a_i, a_j]
        if x[j] == MASK:
            out[i] = row.sum(1)
        else:
            out[i] = row[:, x[j]] / row[:, x[j]].sum()
    return out


STATES = [(a, b) for a in range(V + 1) for b in range(V + 1)]
POST = {s: posterior(np.array(s)) for s in STATES}
TABLE = np.stack([np.log(POST[s]) for s in STATES])  # (16, 2, V)


def logits_fn(t, x):
    idx = x[:, 0] * (V + 1) + x[:, 1]
    return jnp.asarray(TABLE, jnp.float32)[idx]


def exact_law(steps: int, t0: float = 0.0, start=(MASK, MASK)) -> np.ndarray:
    """The sampler's output law by enumeration (linear scheduler)."""
    h = (1.0 - t0) / steps
    law = {start: 1.0}
    for k in range(steps):
        t = t0 + k * h
        p = 1.0 if k == steps - 1 else min(1.0, h / (1.0 - t))
        new: dict = {}
        for s, w in law.items():
            post = POST[s]
            masked = [i for i in range(2) if s[i] == MASK]
            for jump in itertools.product([0, 1], repeat=len(masked)):
                pj = np.prod([p if j else 1 - p for j in jump])
                if pj == 0.0:
                    continue
                movers = [i for i, j in zip(masked, jump, strict=True) if j]
                for vals in itertools.product(range(V), repeat=len(movers)):
                    pv = np.prod([post[i, v] for i, v in zip(movers, vals, strict=True)])
                    ns = list(s)
                    for i, v in zip(movers, vals, strict=True):
                        ns[i] = v
                    new[tuple(ns)] = new.get(tuple(ns), 0.0) + w * pj * pv
        law = new
    out = np.zeros((V, V))
    for (a, b), w in law.items():
        assert MASK not in (a, b)
        out[a, b] += w
    return out


def empirical(steps, n=20000, t0=0.0, start=(MASK, MASK), seed=0):
    x0 = jnp.tile(jnp.asarray(start, jnp.int32), (n, 1))
    x = fd.ctmc_euler_sample(jax.random.key(seed), logits_fn, x0, steps=steps, t0=t0,
                             mask_token=MASK)
    x = np.asarray(x)
    out = np.zeros((V, V))
    np.add.at(out, (x[:, 0], x[:, 1]), 1.0)
    return out / n


def tv(a, b):
    return 0.5 * np.abs(a - b).sum()


def test_enumeration_limits():
    marg = np.outer(P1.sum(1), P1.sum(0))
    np.testing.assert_allclose(exact_law(1), marg, atol=1e-12)
    assert tv(exact_law(400), P1) < 0.01  # simultaneous jumps vanish with the step size
    assert tv(exact_law(3), P1) > 0.03  # ... but not at 3 steps: the test below can fail


@pytest.mark.parametrize("steps", [1, 3])
def test_sampler_law_matches_its_definition(steps):
    # 20000 samples over 9 cells: TV of the empirical law ~ 0.01; 0.025 is > 3 sigma
    assert tv(empirical(steps), exact_law(steps)) < 0.025


def test_sampler_law_from_a_partially_unmasked_state():
    start = (1, MASK)  # position 0 fixed at token 1: position 1 from p1(. | x0 = 1)
    emp = empirical(4, t0=0.5, start=start, seed=1)
    law = exact_law(4, t0=0.5, start=start)
    np.testing.assert_allclose(law[1], P1[1] / P1[1].sum(), atol=1e-12)
    assert emp[[0, 2]].sum() == 0.0  # the unmasked position never changes
    assert tv(emp, law) < 0.025
