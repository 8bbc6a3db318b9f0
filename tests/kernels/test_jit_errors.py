"""Bad input to kernels under ``jit`` / ``vmap`` and eagerly is a ``ValueError`` naming the
argument (issue 58, section 3), not ``INTERNAL: CpuCallback error``, an
``EquinoxRuntimeError``, an ``MLIRError`` or a ``ZeroDivisionError``; a run-time
condition that is no user mistake (an adaptive solve at ``max_steps``) is a flag."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import assignment as asg
from jaxkit.kernels import bandit, checks, flow, flow_ot

KEY = jax.random.key(0)


def _nan_at_3(k, t, arm):
    return jnp.where(t == 3, jnp.nan, 1.0)


def _clear(fn):
    """Run ``fn`` inside clear_errors (how a user reads a failed check under jit)."""
    with checks.clear_errors():
        return jax.block_until_ready(fn())


def test_simulate_nan_reward_eager_is_a_value_error():
    with pytest.raises(ValueError, match="`reward` is NaN or inf.*`reward_fn`"):
        bandit.simulate(KEY, bandit.ucb1(3), _nan_at_3, 5)
    with pytest.raises(ValueError, match="`reward` is NaN or inf"):
        bandit.simulate_runs(KEY, bandit.ucb1(3), lambda k, t, a: jnp.full(2, jnp.nan), 3, 2)


def test_simulate_nan_reward_under_jit_names_reward_fn():
    sim = jax.jit(lambda k: bandit.simulate(k, bandit.ucb1(3), _nan_at_3, 5))
    with pytest.raises(checks.CheckError, match="`reward_fn`"):
        _clear(lambda: sim(KEY))
    runs = jax.jit(jax.vmap(lambda k: bandit.simulate(k, bandit.ucb1(3), _nan_at_3, 5)))
    with pytest.raises(checks.CheckError, match="`reward` is NaN or inf"):
        _clear(lambda: runs(jax.random.split(KEY, 2)))


@pytest.mark.parametrize("n_steps", [-1, 2.5])
def test_simulate_bad_step_count_names_n_steps(n_steps):
    ok = lambda k, t, a: jnp.ones(())  # noqa: E731
    with pytest.raises(ValueError, match="`n_steps` must be a non-negative integer"):
        bandit.simulate(KEY, bandit.ucb1(3), ok, n_steps)
    with pytest.raises(ValueError, match="`n_steps` must be a non-negative integer"):
        bandit.simulate_runs(KEY, bandit.ucb1(3), lambda k, t, a: jnp.ones(2), n_steps, 2)


def test_assignment_nan_cost_eager_jit_and_vmap():
    cost = jnp.array([[1.0, jnp.nan], [2.0, 3.0]])
    msg = "`cost` contains invalid numeric entries: NaN or -inf"
    with pytest.raises(ValueError, match=msg):
        asg.assignment(cost)
    with pytest.raises(checks.CheckError, match=msg):
        _clear(lambda: jax.jit(asg.assignment)(cost))
    with pytest.raises(checks.CheckError, match=msg):
        _clear(lambda: jax.jit(jax.vmap(asg.assignment))(cost[None]))
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        asg.assignment(jnp.array([[0.0, jnp.inf], [0.0, 0.0]]), maximize=True)
    rows, cols, ok = jax.jit(asg.assignment)(jnp.array([[1.0, jnp.inf], [2.0, 3.0]]))
    assert bool(ok) and cols.tolist() == [0, 1]  # +inf stays a forbidden pair


@pytest.mark.parametrize("call", [
    lambda e: flow_ot.exact_coupling(e, e),
    lambda e: flow_ot.exact_coupling(e, e, solver="auction"),
    lambda e: flow_ot.sinkhorn_plan(e, e),
    lambda e: flow_ot.sinkhorn_coupling(KEY, e, e),
    lambda e: flow_ot.ot_cfm_loss(lambda p, t, x: x, None, KEY, e, e),
])
def test_empty_ot_batch_is_a_value_error(call):
    with pytest.raises(ValueError, match="empty batches \\(B = 0\\)"):
        call(jnp.ones((0, 2)))


def _stiff(t, x):
    return jnp.sin(1e3 * t) * 1e3 * x


def test_integrate_at_max_steps_names_max_steps_eager_and_jit():
    msg = "`max_steps` \\(3\\) reached before t1"
    with pytest.raises(ValueError, match=msg):
        flow.integrate(_stiff, jnp.ones(2), method="tsit5", max_steps=3)
    f = jax.jit(lambda x: flow.integrate(_stiff, x, method="tsit5", max_steps=3))
    with pytest.raises(checks.CheckError, match=msg):
        _clear(lambda: f(jnp.ones(2)))


def test_integrate_with_stats_flags_max_steps():
    _, st = flow.integrate_with_stats(_stiff, jnp.ones(2), method="tsit5", max_steps=3)
    assert bool(st["max_steps_reached"]) and not bool(st["solved"])
    x, st = flow.integrate_with_stats(lambda t, x: -x, jnp.ones(2), method="tsit5")
    assert not bool(st["max_steps_reached"]) and bool(st["solved"])
    np.testing.assert_allclose(np.asarray(x), np.exp(-1.0), rtol=1e-4)
    _, st = flow.integrate_with_stats(lambda t, x: -x, jnp.ones(2), steps=4)
    assert not bool(st["max_steps_reached"]) and bool(st["solved"])


@pytest.mark.parametrize("decay", [float("nan"), float("inf"), -0.5])
def test_propagate_credit_bad_decay_names_decay(decay):
    parents = jnp.array([[-1], [0], [1]])
    gain = jnp.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="`decay` must be >= 0"):
        bandit.propagate_credit(parents, gain, decay=decay)
    f = jax.jit(lambda d: bandit.propagate_credit(parents, gain, decay=d))
    with pytest.raises(checks.CheckError, match="`decay` must be >= 0 and finite"):
        _clear(lambda: f(decay))
    np.testing.assert_allclose(np.asarray(f(0.5)), [2.75, 3.5, 3.0])
