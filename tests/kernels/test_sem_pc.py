"""PC-stable (kernels/sem/pc.py) against known answers (chain, fork, collider, a faithful
five-node graph), Meek's rules on hand-made patterns, causal-learn's PC (fisherz, stable,
the same alpha and depth) on random linear-Gaussian data, and jit == vmap; the CPDAG (and
interventional essential graph) of a known DAG, ``dag_to_cpdag``, on hand-made DAGs and
against PC's output on the same batch."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels.sem import dag_to_cpdag, pc
from jaxkit.kernels.sem.pc import _meek


def _linear_sem(rng, b, n):
    """``n`` rows of ``x = b x + e`` (``b[i, j]``: ``j -> i``), Gaussian unit noise."""
    d = b.shape[0]
    return rng.standard_normal((n, d)) @ np.linalg.inv(np.eye(d) - b).T


def _edges(*pairs, d):
    """``b`` with weight 1 (alternating sign) for each ``(j, i)`` edge ``j -> i``."""
    b = np.zeros((d, d))
    for k, (j, i) in enumerate(pairs):
        b[i, j] = 1.0 if k % 2 == 0 else -0.8
    return b


# the CPDAGs, in the kernel's encoding ([i, j] = 1: j -> i; both for i - j)
CHAIN = _edges((0, 1), (1, 2), d=3)  # 0 -> 1 -> 2: 0 - 1 - 2
FORK = _edges((1, 0), (1, 2), d=3)  # 0 <- 1 -> 2: 0 - 1 - 2
COLLIDER = _edges((0, 1), (2, 1), d=3)  # 0 -> 1 <- 2: oriented
UNDIRECTED_PATH = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], float)


N, D, DEPTH, K_RANDOM = 500, 6, 2, 10
FIVE = _edges((0, 1), (0, 2), (1, 3), (2, 3), (3, 4), d=5)  # 0 -> 1 -> 3 <- 2 <- 0, 3 -> 4


def _embed(b):
    """``b`` on the first nodes of a ``D``-node graph (the others isolated)."""
    out = np.zeros((D, D))
    out[:b.shape[0], :b.shape[0]] = b
    return out


def _random_dag(rng):
    b = np.tril(rng.uniform(0.5, 1.5, (D, D)) * rng.choice([-1, 1], (D, D))
                * (rng.random((D, D)) < 0.4), -1)
    p = rng.permutation(D)
    return b[p][:, p]


@functools.cache
def _fit():
    """One compiled PC for every test of the batch: ``alpha`` is traced."""
    return jax.jit(jax.vmap(lambda x, a: pc(x, alpha=a, max_depth=DEPTH)))


@functools.cache
def _truths():
    """The batch's DAGs (the known answers, then random ones) and their data."""
    rng = np.random.default_rng(0)
    truths = [_embed(b) for b in (CHAIN, FORK, COLLIDER, FIVE)]
    truths += [_random_dag(rng) for _ in range(K_RANDOM)]
    return np.stack(truths), np.stack([_linear_sem(rng, b, N) for b in truths])


@functools.cache
def _batch():
    """The known answers (alpha 0.01), then random linear-Gaussian DAGs (alpha 0.05),
    fitted in float32 and float64 by the same compiled function."""
    _, x = _truths()
    alpha = np.array([0.01] * 4 + [0.05] * K_RANDOM)
    r32 = _fit()(jnp.asarray(x, jnp.float32), jnp.asarray(alpha, jnp.float32))
    r64 = _fit()(jnp.asarray(x), jnp.asarray(alpha))
    return x, alpha, jax.tree.map(np.asarray, r32), jax.tree.map(np.asarray, r64)


def test_chain_fork_collider_known_answers_float32_and_float64():
    _, _, r, r64 = _batch()
    assert r.cpdag.dtype == np.float32
    cp = r.cpdag[:3, :3, :3]
    np.testing.assert_array_equal(cp[0], UNDIRECTED_PATH)  # chain: no v-structure
    np.testing.assert_array_equal(cp[1], UNDIRECTED_PATH)  # fork: the same class
    np.testing.assert_array_equal(cp[2], (COLLIDER != 0).astype(float))  # collider
    assert not r.skeleton[:3, 3:].any()  # the isolated nodes stay isolated
    assert r.sepset[0, 0, 2, 1] and r.sepset[1, 0, 2, 1]  # 0 _||_ 2 | 1 (chain, fork)
    assert not r.sepset[2, 0, 2].any()  # collider: 0 _||_ 2 marginally
    np.testing.assert_array_equal(r64.cpdag[:4], r.cpdag[:4])  # float64: the same graphs


def test_faithful_five_nodes_recovers_the_true_cpdag_with_meek_r1():
    _, _, r, _ = _batch()
    want = np.zeros((D, D))
    want[1, 0] = want[0, 1] = want[2, 0] = want[0, 2] = 1  # 0 - 1, 0 - 2 undirected
    want[3, 1] = want[3, 2] = want[4, 3] = 1  # v-structure 1 -> 3 <- 2; R1: 3 -> 4
    np.testing.assert_array_equal(r.cpdag[3], want)


def _pattern(d, directed=(), undirected=()):
    skel = np.zeros((d, d), bool)
    head = np.zeros((d, d), bool)
    for a, c in directed:  # a -> c: arrowhead at c
        skel[a, c] = skel[c, a] = head[c, a] = True
    for a, c in undirected:
        skel[a, c] = skel[c, a] = True
    return jnp.asarray(skel), jnp.asarray(head)


def _directed(skel, head):
    return {(int(a), int(c)) for a, c in zip(*np.nonzero(np.asarray(skel & head.T & ~head)),
                                             strict=True)}


@pytest.mark.parametrize("directed, undirected, want", [
    # R1: 0 -> 1 - 2, 0 and 2 not adjacent
    (((0, 1),), ((1, 2),), {(0, 1), (1, 2)}),
    # R2: 0 -> 1 -> 2 and 0 - 2
    (((0, 1), (1, 2)), ((0, 2),), {(0, 1), (1, 2), (0, 2)}),
    # R3: 0 - 1 -> 3, 0 - 2 -> 3, 1 and 2 not adjacent, 0 - 3
    (((1, 3), (2, 3)), ((0, 1), (0, 2), (0, 3)), {(1, 3), (2, 3), (0, 3)}),
    # nothing to orient: 0 - 1 - 2 with no arrow
    ((), ((0, 1), (1, 2)), set()),
])
def test_meek_rules_on_hand_made_patterns(directed, undirected, want):
    skel, head = _pattern(4, directed, undirected)
    assert _directed(skel, _jit_meek()(skel, head)) == want


@functools.cache
def _jit_meek():
    return jax.jit(_meek)


def _causal_learn(x, alpha, depth):
    """causal-learn's PC: Fisher z, stable, v-structures with bidirected conflicts
    (``uc_priority=1``, the order-independent choice the kernel makes), Meek's rules."""
    cl = pytest.importorskip("causallearn.search.ConstraintBased.PC")
    g = cl.pc(x, alpha, "fisherz", True, 0, 1, max_k=depth, show_progress=False).G.graph
    return g != 0, g == 1  # skeleton; arrowhead at i on the edge i - j


def test_against_causal_learn_on_random_linear_gaussian_data():
    pytest.importorskip("causallearn")
    x, alpha, _, r = _batch()
    conflict_free = 0
    for i in range(4, 4 + K_RANDOM):
        skel, head = _causal_learn(x[i], alpha[i], DEPTH)
        np.testing.assert_array_equal(r.skeleton[i], skel)
        if (r.arrowheads[i] & r.arrowheads[i].T).any():
            continue  # a conflict (bidirected edge): causal-learn's sequential rules differ
        conflict_free += 1
        np.testing.assert_array_equal(r.arrowheads[i], head)
    assert conflict_free >= K_RANDOM - 2


def test_jit_equals_vmap():
    x, alpha, _, many = _batch()
    one = jax.jit(lambda x: pc(x, alpha=0.05, max_depth=DEPTH))
    for i in (4, 5):
        single = one(jnp.asarray(x[i]))
        for a, c in zip(single, many, strict=True):
            np.testing.assert_array_equal(np.asarray(a), c[i])


@pytest.mark.parametrize("kw, x, match", [
    (dict(max_depth=-1), np.ones((10, 3)), "max_depth"),
    (dict(alpha=1.5), np.random.default_rng(0).standard_normal((10, 3)), "alpha"),
    (dict(max_depth=3), np.random.default_rng(0).standard_normal((6, 5)), "rows"),
    (dict(), np.full((10, 3), np.nan), "NaN"),
    (dict(), np.random.default_rng(0).standard_normal((10,)), "2-D"),
])
def test_bad_input(kw, x, match):
    with pytest.raises(ValueError, match=match):
        pc(jnp.asarray(x), **kw)


# ------------------------------------------------------------------ dag_to_cpdag

K_TARGETS = 2  # target sets per case (all false: observational)


def _case(b, *targets):
    t = np.zeros((K_TARGETS, D), bool)
    for k, nodes in enumerate(targets):
        t[k, list(nodes)] = True
    return _embed(b), t


COLLIDER_R1 = _edges((0, 1), (2, 1), (1, 3), d=4)  # 0 -> 1 <- 2, 1 -> 3
FIVE_EQUIV = _edges((1, 0), (0, 2), (1, 3), (2, 3), (3, 4), d=5)  # FIVE with 1 -> 0
CPDAG_CASES = [  # (name, (b, targets)); the first are the PC batch's truths, in order
    ("chain", _case(CHAIN)), ("fork", _case(FORK)), ("collider", _case(COLLIDER)),
    ("five", _case(FIVE)), ("collider_r1", _case(COLLIDER_R1)),
    ("five_equiv", _case(FIVE_EQUIV)),
    ("chain_do1", _case(CHAIN, (), (1,))), ("chain_do2", _case(CHAIN, (2,))),
    ("chain_do0", _case(CHAIN, (0,), ())),
]


@functools.cache
def _cpdags():
    """Every case through one compiled ``jit(vmap(dag_to_cpdag))`` (float64)."""
    b = np.stack([c[1][0] for c in CPDAG_CASES])
    t = np.stack([c[1][1] for c in CPDAG_CASES])
    out = np.asarray(jax.jit(jax.vmap(dag_to_cpdag))(jnp.asarray(b), jnp.asarray(t)))
    return {name: out[i] for i, (name, _) in enumerate(CPDAG_CASES)}


def _dir(*pairs):
    """The CPDAG encoding with ``j -> i`` directed for each ``(j, i)``."""
    out = np.zeros((D, D))
    for j, i in pairs:
        out[i, j] = 1
    return out


def _und(*pairs):
    out = _dir(*pairs)
    return out + out.T


def test_dag_to_cpdag_chain_collider_and_meek_r1():
    c = _cpdags()
    np.testing.assert_array_equal(c["chain"], _embed(UNDIRECTED_PATH))  # all undirected
    np.testing.assert_array_equal(c["fork"], _embed(UNDIRECTED_PATH))
    np.testing.assert_array_equal(c["collider"], _dir((0, 1), (2, 1)))  # stays directed
    # 0 -> 1 <- 2 and 1 -> 3: 1 -> 3 compelled by R1 (0, 3 not adjacent)
    np.testing.assert_array_equal(c["collider_r1"], _dir((0, 1), (2, 1), (1, 3)))


def test_dag_to_cpdag_is_a_class_invariant():
    c = _cpdags()
    want = _und((0, 1), (0, 2)) + _dir((1, 3), (2, 3), (3, 4))
    np.testing.assert_array_equal(c["five"], want)
    np.testing.assert_array_equal(c["five_equiv"], want)  # 1 -> 0: the same class


def test_dag_to_cpdag_equals_pc_on_large_n_faithful_data():
    """PC recovers the known answers exactly (the tests above): its CPDAG is the true
    DAG's, in float32 and float64."""
    c, (b, _), (_, _, r32, r64) = _cpdags(), _truths(), _batch()
    for i, name in enumerate(("chain", "fork", "collider", "five")):
        np.testing.assert_array_equal(c[name], r64.cpdag[i])
        np.testing.assert_array_equal(c[name], r32.cpdag[i])
    one = jax.jit(dag_to_cpdag)  # float32 input, no targets: the dtype follows b
    got = one(jnp.asarray(b[3], jnp.float32))
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got), c["five"])


def test_dag_to_cpdag_targets_orient_cut_edges_then_meek():
    c = _cpdags()
    # do(1) cuts 0 - 1 and 1 - 2: the chain is fully oriented
    np.testing.assert_array_equal(c["chain_do1"], _dir((0, 1), (1, 2)))
    # do(2) cuts only 1 - 2; nothing orients 0 - 1 (no arrow into 1)
    np.testing.assert_array_equal(c["chain_do2"], _und((0, 1)) + _dir((1, 2)))
    # do(0) cuts 0 - 1, then R1 (0 -> 1 - 2, 0 and 2 not adjacent) orients 1 -> 2
    np.testing.assert_array_equal(c["chain_do0"], _dir((0, 1), (1, 2)))
