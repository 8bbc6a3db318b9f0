"""Batching rules shared by the kernels.

The batched-LAPACK hang (jaxlib 0.10.2, XLA:CPU). jaxlib's CPU LAPACK custom calls
(Cholesky, LU, ``eigh``, SVD, triangular solves) split a *batch* over XLA:CPU's
intra-op thread pool and wait for the pieces inside the call; XLA:CPU runs independent
operations of a program on that same pool. On a 2-core machine (a 2-thread pool) a
program with batched calls under ``vmap`` then hangs at random, with no error and no
CPU use (gdb: ``lapack_spotrf_ffi`` frames in ``BlockingCounter::Wait``). Measured
(tests/jaxkit/test_deadlock.py's reproducer, 8 members of 8 independent 160 x 160
Cholesky solves, pinned to 2 cores): vmapped 4 at a time in ``lax.map``, 1 of 3 runs
hung; top-level ``vmap``, 1 of 3; the solves chained one after another by
``lax.optimization_barrier``, still 2 of 5 (so ordering the calls is *not* a fix); the
members mapped one at a time (each call unbatched), 0 of 5 and 0 of 5 with one solve.
The mitigation is therefore to keep LAPACK calls unbatched on CPU: kernels with LAPACK
calls take ``sequential_vmap`` and use :func:`map_over_batch`, whose CPU default maps
the batch members one after another (FastICA, DirectLiNGAM's fit, pruning and kernel
measure, sortability); pipelines map seeds one at a time (misaligned).
"""

from __future__ import annotations

import functools

import jax

__all__ = ["map_over_batch", "resolve_sequential_vmap"]


def resolve_sequential_vmap(sequential_vmap: bool | None) -> bool:
    """The batching rule a public kernel uses under ``vmap``.

    Public kernels built on :func:`map_over_batch` take ``sequential_vmap: bool | None =
    None`` and resolve it here, once, at their boundary: ``None`` picks the sequential
    rule when the default backend is ``"cpu"`` and plain batching on GPU/TPU.

    Args:
        sequential_vmap: ``True`` or ``False`` to force a rule, ``None`` for the
            backend's default.

    Returns:
        Whether ``vmap`` maps the batch members one after another.
    """
    if sequential_vmap is None:
        return jax.default_backend() == "cpu"
    if not isinstance(sequential_vmap, bool):
        raise ValueError(f"`sequential_vmap` must be True, False or None; got "
                         f"{sequential_vmap!r}")
    return sequential_vmap


def map_over_batch(f, *, sequential: bool, differentiate=None):
    """``f`` with a custom ``vmap`` rule: sequential (``lax.map``) or plain batching.

    Under a plain ``vmap`` a batched ``while_loop`` iterates every member until the
    slowest has converged (converged members are carried along by ``select``), and every
    step streams the whole batch's intermediates through memory. With
    ``sequential=True`` the members are mapped one after another instead: each stops at
    its own tolerance (the same ``n_iter`` as a lone fit) and keeps one member's working
    set in cache; the results are identical. It also keeps each member's ops small, which
    sidesteps an XLA:CPU stall seen when several simulated CPU devices run large batched
    while-loops at once (see benchmarks/RESULTS.md). On GPU/TPU one wide batched step
    beats many narrow sequential ones, hence ``sequential=False`` there (see
    :func:`resolve_sequential_vmap`). Nested ``vmap`` batches the mapped body as usual.

    Args:
        f: a function of positional array arguments.
        sequential: the batching rule (static): ``True`` maps the batch members with
            ``lax.map``, ``False`` is plain ``vmap`` batching.

        differentiate: keeps reverse mode: a function with ``f``'s signature that
            computes the same function and that JAX can differentiate in both modes (no
            ``while_loop``, no ``lax.cond`` on a value that depends on the inputs: JAX
            cannot transpose such a ``cond`` inside a custom JVP rule). The mapped
            function is then wrapped in a ``jax.custom_jvp`` whose rule takes the values
            from ``f`` under the chosen rule and the tangents from ``differentiate``'s
            JVP (batched plainly where it runs under ``vmap``), so ``jax.grad`` and
            ``jax.jvp`` work.

    Reverse mode without ``differentiate``: JAX cannot transpose a custom ``vmap`` rule,
    so ``jax.grad`` through the returned function raises a ``ValueError`` saying so
    (instead of JAX's bare "Linearization failed"); forward mode (``jax.jvp``,
    ``jax.jacfwd``) works.

    Returns:
        A function with ``f``'s signature and values and the chosen ``vmap`` rule.
    """
    g = jax.custom_batching.custom_vmap(f)

    @g.def_vmap
    def rule(axis_size, in_batched, *args):
        flags = tuple(in_batched)
        batched = tuple(a for a, b in zip(args, flags, strict=True) if b)
        if not batched:  # e.g. only a tangent is batched under jvp: nothing to map over
            out = f(*args)
            return out, jax.tree.map(lambda _: False, out)
        if not sequential:
            axes = tuple(0 if b else None for b in flags)
            out = jax.vmap(f, in_axes=axes)(*args)
            return out, jax.tree.map(lambda _: True, out)

        def one(members):
            it = iter(members)
            return f(*(next(it) if b else a for a, b in zip(args, flags, strict=True)))

        out = jax.lax.map(one, batched)
        return out, jax.tree.map(lambda _: True, out)

    if differentiate is not None:
        mapped = g
        g = jax.custom_jvp(lambda *args: mapped(*args))

        @g.defjvp
        def _jvp(primals, tangents):
            return mapped(*primals), jax.jvp(differentiate, primals, tangents)[1]

    # the enclosing public kernel for a closure ("fastica.<locals>.core" -> "fastica")
    name = getattr(f, "__qualname__", "the kernel").split(".<locals>")[0]

    @functools.wraps(f)
    def call(*args):
        try:
            return g(*args)
        except ValueError as e:  # JAX's reverse-mode failure on the custom vmap rule
            if "Linearization failed" not in str(e):
                raise
            raise ValueError(
                f"reverse-mode differentiation (jax.grad, jax.vjp) is not supported through "
                f"{name}: it runs under a custom vmap rule (map_over_batch, "
                f"kernels/_batching.py) that JAX can only differentiate in forward mode; "
                f"use jax.jvp or jax.jacfwd") from e

    return call
