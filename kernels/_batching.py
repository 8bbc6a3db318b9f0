"""Batching rules shared by the kernels."""

from __future__ import annotations

import jax

__all__ = ["map_over_batch"]


def map_over_batch(f):
    """``f`` whose ``vmap`` runs the members one after another (``lax.map``) on CPU.

    ``f`` takes positional array arguments. Under a plain ``vmap`` a batched
    ``while_loop`` iterates every member until the slowest has converged (converged
    members are carried along by ``select``), and every step streams the whole batch's
    intermediates through memory. On CPU, mapping instead stops each member at its own
    tolerance (the same ``n_iter`` as a lone fit) and keeps one member's working set in
    cache; the results are identical. It also keeps each member's ops small, which
    sidesteps an XLA:CPU stall seen when several simulated CPU devices run large
    batched while-loops at once (see benchmarks/RESULTS.md).

    On GPU/TPU (the default backend at trace time is not ``"cpu"``) the rule is plain
    batching: there, one wide batched step beats many narrow sequential ones.
    Nested ``vmap`` batches the mapped body as usual.
    """
    g = jax.custom_batching.custom_vmap(f)

    @g.def_vmap
    def rule(axis_size, in_batched, *args):
        flags = tuple(in_batched)
        batched = tuple(a for a, b in zip(args, flags, strict=True) if b)
        if not batched:  # e.g. only a tangent is batched under jvp: nothing to map over
            out = f(*args)
            return out, jax.tree.map(lambda _: False, out)
        if jax.default_backend() != "cpu":
            axes = tuple(0 if b else None for b in flags)
            out = jax.vmap(f, in_axes=axes)(*args)
            return out, jax.tree.map(lambda _: True, out)

        def one(members):
            it = iter(members)
            return f(*(next(it) if b else a for a, b in zip(args, flags, strict=True)))

        out = jax.lax.map(one, batched)
        return out, jax.tree.map(lambda _: True, out)

    return g
