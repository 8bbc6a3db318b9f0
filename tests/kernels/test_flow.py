"""Flow kernels: the linear path, the CFM loss, and the fixed-step integrator against
closed forms (exact on linear-in-t fields, convergence orders on dx/dt = -x), pytrees,
the post hook, gradients against finite differences, and vmap against a loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import flow


def test_linear_path_endpoints_and_velocity():
    x0 = {"a": jnp.array([1.0, -2.0]), "b": jnp.array(3.0)}
    x1 = {"a": jnp.array([0.0, 4.0]), "b": jnp.array(-1.0)}
    for t in (0.0, 0.3, 1.0):
        xt, ut = flow.linear_path(x0, x1, t)
        np.testing.assert_allclose(xt["a"], (1 - t) * x0["a"] + t * x1["a"], rtol=1e-6)
        np.testing.assert_allclose(ut["b"], -4.0)
    xt, _ = flow.linear_path(x0, x1, 1.0)
    np.testing.assert_allclose(xt["a"], x1["a"])


def test_cfm_loss_zero_for_true_velocity_and_positive_otherwise():
    key = jax.random.key(0)
    x0 = jnp.zeros(3)
    x1 = jnp.array([1.0, 2.0, 3.0])

    def exact(params, t, x):
        return x1 - x0

    def wrong(params, t, x):
        return params * x

    assert float(flow.cfm_loss(exact, None, key, x1, x0)) == pytest.approx(0.0, abs=1e-12)
    assert float(flow.cfm_loss(wrong, 0.0, key, x1, x0)) == pytest.approx(14.0 / 3)
    g = jax.grad(lambda p: flow.cfm_loss(wrong, p, key, x1, x0))(0.5)
    assert np.isfinite(float(g))


@pytest.mark.parametrize("method", flow.METHODS)
def test_constant_velocity_exact(method):
    # a rectified flow with constant velocity is integrated exactly by every method
    x0 = jnp.array([0.2, -1.0])
    u = jnp.array([1.5, 2.0])
    x = flow.integrate(lambda t, x: u, x0, method=method, steps=3)
    np.testing.assert_allclose(x, x0 + u, rtol=1e-6)


@pytest.mark.parametrize("method", ["midpoint", "heun", "rk4"])
def test_time_linear_field_exact_for_second_order(method):
    # dx/dt = 2t -> x(1) = x0 + 1; exact for methods of order >= 2
    x = flow.integrate(lambda t, x: 2 * t * jnp.ones_like(x), jnp.zeros(2), method=method,
                       steps=4)
    np.testing.assert_allclose(x, 1.0, rtol=1e-6)


def _decay_error(method, steps):
    x = flow.integrate(lambda t, x: -x, jnp.array(1.0, jnp.float64), method=method,
                       steps=steps)
    return abs(float(x) - np.exp(-1.0))


@pytest.mark.parametrize("method,order", [("euler", 1), ("midpoint", 2), ("heun", 2),
                                          ("rk4", 4)])
def test_convergence_order(method, order):
    with jax.enable_x64(True):
        e1, e2 = _decay_error(method, 8), _decay_error(method, 16)
    assert np.log2(e1 / e2) == pytest.approx(order, abs=0.3)


def test_rk4_much_better_than_euler():
    with jax.enable_x64(True):
        assert _decay_error("rk4", 10) < 1e-3 * _decay_error("euler", 10)


def test_pytree_state_and_t_range():
    # x' = -x, y' = 1 from t=1 to t=3
    x0 = (jnp.array([1.0, 2.0]), {"y": jnp.array(0.0)})

    def v(t, s):
        return (-s[0], {"y": jnp.ones_like(s[1]["y"])})

    x, d = flow.integrate(v, x0, method="rk4", steps=40, t0=1.0, t1=3.0)
    np.testing.assert_allclose(x, np.array([1.0, 2.0]) * np.exp(-2.0), rtol=1e-5)
    np.testing.assert_allclose(d["y"], 2.0, rtol=1e-6)


def test_post_hook_called_at_step_end_times():
    # post records nothing but clamps; with velocity 1 and a clamp at 0.5 the result is 0.5
    x = flow.integrate(lambda t, x: jnp.ones_like(x), jnp.zeros(1), steps=10,
                       post=lambda t, x: jnp.minimum(x, 0.5))
    np.testing.assert_allclose(x, 0.5)
    # post receives t = t0 + (i+1) dt: accumulate t via post
    acc = flow.integrate(lambda t, x: jnp.zeros_like(x), jnp.zeros(()), steps=4,
                         post=lambda t, x: x + t)
    np.testing.assert_allclose(acc, 0.25 + 0.5 + 0.75 + 1.0, rtol=1e-6)
    # wrapping on a torus
    x = flow.integrate(lambda t, x: jnp.full_like(x, 1.3), jnp.zeros(2), steps=5,
                       post=lambda t, x: jnp.mod(x, 1.0))
    np.testing.assert_allclose(x, 0.3, atol=1e-5)


@pytest.mark.parametrize("method", flow.METHODS)
def test_grad_matches_finite_differences(method):
    with jax.enable_x64(True):
        def final(a, x0):
            return flow.integrate(lambda t, x: -a * x + jnp.sin(t), x0, method=method,
                                  steps=12)

        a, x0 = 0.7, jnp.array(1.3, jnp.float64)
        ga, gx = jax.grad(final, argnums=(0, 1))(a, x0)
        h = 1e-6
        fa = (final(a + h, x0) - final(a - h, x0)) / (2 * h)
        fx = (final(a, x0 + h) - final(a, x0 - h)) / (2 * h)
        np.testing.assert_allclose(ga, fa, rtol=1e-6)
        np.testing.assert_allclose(gx, fx, rtol=1e-6)


def test_vmap_equals_loop_and_jit():
    rates = jnp.array([0.5, 1.0, 2.0])
    x0s = jnp.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])

    def solve(rate, x0):
        return flow.integrate(lambda t, x: -rate * x, x0, method="heun", steps=20)

    batched = jax.jit(jax.vmap(solve))(rates, x0s)
    loop = np.stack([solve(r, x) for r, x in zip(rates, x0s, strict=True)])
    np.testing.assert_allclose(batched, loop, rtol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="method"):
        flow.integrate(lambda t, x: x, jnp.zeros(1), method="rk45")
    with pytest.raises(ValueError, match="steps"):
        flow.integrate(lambda t, x: x, jnp.zeros(1), steps=0)
