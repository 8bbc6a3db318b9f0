"""ODE samplers: fixed-step Runge-Kutta in one ``lax.scan`` and adaptive diffrax
solvers, with velocity-evaluation counts."""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..checks import check_in_range, fail, fail_first, is_traced
from ._tree import PyTree, axpy, state_dtype, tleaves, tmap

__all__ = ["METHODS", "FIXED_METHODS", "ADAPTIVE_METHODS", "integrate",
           "integrate_with_stats"]

FIXED_METHODS = ("euler", "midpoint", "heun", "rk4")
ADAPTIVE_METHODS = ("tsit5", "dopri5", "dopri8")
# The fixed-step methods under their first name (tests parametrize over it).
METHODS = FIXED_METHODS
_EVALS_PER_STEP = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}


def _step(method: str, velocity: Callable, t, x: PyTree, dt) -> PyTree:
    if method == "euler":
        return axpy(dt, velocity(t, x), x)
    if method == "midpoint":
        k1 = velocity(t, x)
        return axpy(dt, velocity(t + dt / 2, axpy(dt / 2, k1, x)), x)
    if method == "heun":
        k1 = velocity(t, x)
        k2 = velocity(t + dt, axpy(dt, k1, x))
        return axpy(dt / 2, tmap(jnp.add, k1, k2), x)
    # rk4
    k1 = velocity(t, x)
    k2 = velocity(t + dt / 2, axpy(dt / 2, k1, x))
    k3 = velocity(t + dt / 2, axpy(dt / 2, k2, x))
    k4 = velocity(t + dt, axpy(dt, k3, x))
    ks = tmap(lambda a, b, c, d: a + 2 * b + 2 * c + d, k1, k2, k3, k4)
    return axpy(dt / 6, ks, x)



def _validate(velocity, x0, method, steps, t0, t1, reverse, post, rtol=1.0, atol=1.0,
              max_steps=1):
    if method not in FIXED_METHODS + ADAPTIVE_METHODS:
        raise ValueError(f"method must be one of {FIXED_METHODS + ADAPTIVE_METHODS}; "
                         f"got {method!r}")
    if method in FIXED_METHODS:
        if steps is None or int(steps) != steps or steps < 1:
            raise ValueError(f"steps must be a positive integer for method {method!r}; "
                             f"got {steps!r}")
    elif steps is not None and (int(steps) != steps or steps < 1):
        raise ValueError(f"steps (the dt0 hint) must be None or a positive integer; "
                         f"got {steps!r}")
    if method in ADAPTIVE_METHODS and post is not None:
        raise ValueError("post is only supported by the fixed-step methods "
                         f"{FIXED_METHODS}; got method {method!r}")
    if method in ADAPTIVE_METHODS:
        check_in_range(rtol, "rtol", lo=0, lo_open=True)
        check_in_range(atol, "atol", lo=0, lo_open=True)
        check_in_range(max_steps, "max_steps", lo=1, integer=True)
    if not (is_traced(t0) or is_traced(t1)):
        a, b = float(np.asarray(t0)), float(np.asarray(t1))
        if not (np.isfinite(a) and np.isfinite(b)):
            raise ValueError(f"t0 and t1 must be finite; got t0={a}, t1={b}")
        if not reverse and a >= b:
            raise ValueError(f"t0 must be < t1 (pass reverse=True to integrate backwards); "
                             f"got t0={a}, t1={b}")
        if reverse and a <= b:
            raise ValueError(f"with reverse=True, t0 must be > t1; got t0={a}, t1={b}")
    dtype = state_dtype(x0)
    out = jax.eval_shape(velocity, jax.ShapeDtypeStruct((), dtype), x0)
    want = jax.tree_util.tree_map(lambda a: jnp.shape(a), x0)
    got = jax.tree_util.tree_map(lambda a: tuple(a.shape), out)
    if jax.tree_util.tree_structure(out) != jax.tree_util.tree_structure(x0) or any(
            tuple(jnp.shape(a)) != tuple(b.shape)
            for a, b in zip(tleaves(x0), tleaves(out), strict=True)):
        raise ValueError(f"velocity(t, x) must return the shapes of x0 {want}; got {got}")


def _finite(x: PyTree):
    """Whether every inexact leaf of ``x`` is finite (a boolean scalar)."""
    oks = [jnp.all(jnp.isfinite(a)) for a in tleaves(x)
           if jnp.issubdtype(jnp.asarray(a).dtype, jnp.inexact)]
    return jnp.all(jnp.stack(oks)) if oks else jnp.asarray(True)


_SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}


def integrate_with_stats(velocity: Callable, x0: PyTree, *, method: str = "euler",
                         steps: int | None = 50, t0=0.0, t1=1.0,
                         post: Callable | None = None, rtol: float = 1e-5,
                         atol: float = 1e-5, max_steps: int = 4096,
                         reverse: bool = False) -> tuple[PyTree, dict]:
    """:func:`integrate` that also returns ``stats``: ``nfe`` (velocity evaluations),
    ``num_steps`` (attempted steps), ``num_accepted_steps``, ``num_rejected_steps``.

    For the adaptive methods ``nfe`` is computed from diffrax's step counts and the
    solver's Butcher tableau (FSAL: ``stages - 1`` per attempted step plus one initial
    evaluation, shared with the automatic initial-step selection); the tests check it
    against a counting callback.

    Differentiable: yes, in x0, t0, t1 and the velocity's parameters.

    Args:
        velocity, x0, method, steps, t0, t1, post, rtol, atol, max_steps, reverse: as in
            :func:`integrate`, which documents each.

    Returns:
        ``(x(t1), stats)`` with ``stats`` a dict of int32 scalars and the booleans
        ``"finite"`` (False when the velocity produced NaN or inf on the way),
        ``"max_steps_reached"`` (an adaptive solve stopped at ``max_steps`` before
        ``t1``; the state returned is then not ``x(t1)``) and ``"solved"`` (the adaptive
        solver reached ``t1``; True for the fixed-step methods). Flags here;
        :func:`integrate` raises instead.

    Raises:
        ValueError: as :func:`integrate`; NaN/inf in ``x0`` (a run-time check when
            traced).
    """
    _validate(velocity, x0, method, steps, t0, t1, reverse, post, rtol, atol, max_steps)
    leaves, treedef = jax.tree_util.tree_flatten(x0)
    if leaves:
        leaves[0] = fail(leaves[0], ~_finite(x0), "`x0` contains NaN or inf values")
        x0 = jax.tree_util.tree_unflatten(treedef, leaves)
    dtype = state_dtype(x0)
    user_velocity = velocity

    def velocity(t, x):  # the state keeps x0's dtypes (e.g. float32 under x64 closures)
        return tmap(lambda v, a: jnp.asarray(v).astype(jnp.asarray(a).dtype),
                    user_velocity(t, x), x)

    t0 = jnp.asarray(t0, dtype)
    t1 = jnp.asarray(t1, dtype)
    if method in FIXED_METHODS:
        steps = int(steps)
        dt = (t1 - t0) / steps

        def body(x, i):
            t = t0 + i.astype(dtype) * dt
            x = _step(method, velocity, t, x, dt)
            if post is not None:
                x = post(t + dt, x)
            return x, None

        x, _ = lax.scan(body, x0, jnp.arange(steps))
        n = jnp.asarray(steps, jnp.int32)
        stats = {"nfe": n * _EVALS_PER_STEP[method], "num_steps": n,
                 "num_accepted_steps": n, "num_rejected_steps": jnp.zeros((), jnp.int32),
                 "finite": _finite(x), "max_steps_reached": jnp.asarray(False),
                 "solved": jnp.asarray(True)}
        return x, stats
    solver = _SOLVERS[method]()
    term = diffrax.ODETerm(lambda t, y, args: velocity(t, y))
    dt0 = None if steps is None else (t1 - t0) / int(steps)
    sol = diffrax.diffeqsolve(
        term, solver, t0, t1, dt0, x0,
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps, saveat=diffrax.SaveAt(t1=True), throw=False)
    x = tmap(lambda a: a[-1], sol.ys)
    tab = solver.tableau
    per = tab.num_stages - 1 if tab.fsal else tab.num_stages
    nsteps = jnp.asarray(sol.stats["num_steps"], jnp.int32)
    init = 1
    stats = {"nfe": per * nsteps + init, "num_steps": nsteps,
             "num_accepted_steps": jnp.asarray(sol.stats["num_accepted_steps"], jnp.int32),
             "num_rejected_steps": jnp.asarray(sol.stats["num_rejected_steps"], jnp.int32),
             "finite": _finite(x),
             "max_steps_reached": sol.result == diffrax.RESULTS.max_steps_reached,
             "solved": sol.result == diffrax.RESULTS.successful}
    return x, stats


def integrate(velocity: Callable, x0: PyTree, *, method: str = "euler",
              steps: int | None = 50, t0=0.0, t1=1.0, post: Callable | None = None,
              rtol: float = 1e-5, atol: float = 1e-5, max_steps: int = 4096,
              reverse: bool = False) -> PyTree:
    """Integrate ``dx/dt = velocity(t, x)`` from ``t0`` to ``t1``; returns the state at ``t1``.

    Fixed-step ``method``: ``"euler"`` (order 1, 1 evaluation per step), ``"midpoint"`` /
    ``"heun"`` (order 2, 2 evaluations), ``"rk4"`` (order 4, 4 evaluations): ``steps``
    equal steps in one ``lax.scan`` (fixed cost; ``jit``/``vmap``/``grad`` through it);
    ``post(t, x) -> x`` is applied after every step at the step's end time (e.g. wrapping
    periodic coordinates). Adaptive ``method``: ``"tsit5"``, ``"dopri5"``, ``"dopri8"``
    through :func:`diffrax.diffeqsolve` with ``PIDController(rtol, atol)``; ``steps`` is the
    initial-step hint ``dt0 = (t1 - t0) / steps`` (``None``: automatic), ``max_steps`` caps
    the attempted steps (reaching it raises a ``ValueError`` naming ``max_steps``;
    :func:`integrate_with_stats` flags it instead). ``t0 < t1`` is required unless
    ``reverse=True`` (then ``t0 > t1``). ``x0`` is any pytree; ``t0``/``t1`` may be traced;
    ``velocity`` must return ``x0``'s shapes (checked with :func:`jax.eval_shape`).

    References: J. C. Butcher, "Numerical methods for ordinary differential equations",
    2016 (the explicit Runge-Kutta methods); C. Tsitouras, Comput. Math. Appl. 62, 2011
    (Tsit5); J. R. Dormand, P. J. Prince, J. Comput. Appl. Math. 6, 1980 (Dopri5).

    Differentiable: yes, in x0, t0, t1 and the velocity's parameters (fixed steps: a scan; adaptive:
    diffrax's checkpointed adjoint).

    Args:
        velocity: ``velocity(t, x) -> dx/dt``, ``x`` of ``x0``'s shapes.
        x0: initial state (any pytree).
        method: ``"euler"``, ``"midpoint"``, ``"heun"``, ``"rk4"``, ``"tsit5"``,
            ``"dopri5"`` or ``"dopri8"`` (static).
        steps: number of steps (static; for the adaptive methods the ``dt0`` hint).
        t0: initial time.
        t1: final time.
        post: optional ``post(t, x) -> x`` after every fixed step.
        rtol: adaptive methods' relative tolerance.
        atol: adaptive methods' absolute tolerance.
        max_steps: adaptive methods' step cap (static).
        reverse: integrate backwards, ``t0 > t1`` (static).

    Returns:
        The state at ``t1``, of ``x0``'s shapes.

    Raises:
        ValueError: bad options or shapes; NaN/inf in ``x0``, a NaN/inf state produced
            by ``velocity``, an adaptive solve that reached ``max_steps`` or failed
            otherwise (under ``jit``, run-time checks; see
            :func:`jaxkit.kernels.checks.clear_errors` for reading them cleanly).
    """
    x, stats = integrate_with_stats(velocity, x0, method=method, steps=steps, t0=t0, t1=t1,
                                    post=post, rtol=rtol, atol=atol, max_steps=max_steps,
                                    reverse=reverse)
    leaves, treedef = jax.tree_util.tree_flatten(x)
    if leaves:
        leaves[0] = fail_first(leaves[0], [
            (stats["max_steps_reached"],
             f"`max_steps` ({max_steps}) reached before t1: the adaptive {method} solver "
             f"needs more steps (raise max_steps, or loosen rtol / atol)"),
            (~stats["finite"],
             "`velocity` produced NaN or inf values while integrating (x0 was finite)"),
            (~stats["solved"], f"the adaptive {method} solver failed before t1 (step size "
                               f"underflow or non-finite steps)")])
    return jax.tree_util.tree_unflatten(treedef, leaves)

