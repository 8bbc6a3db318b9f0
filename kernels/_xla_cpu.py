"""XLA:CPU compiler options applied per jitted program, checked against the running jaxlib.

XLA:CPU (jax 0.10) hands some elementwise and reduction fusions to YNNPACK (``__ynn_fusion``
in the optimised HLO). On the many small per-chunk arrays of the causal task sampler
(products of a chunk's parents reduced over the parent axis, tanh / cosine / moments of
``(chunk, n)`` rows) those fusions ran slower than XLA's own loop emitters
(benchmarks/RESULTS.md, "CausalTab prior sampler without YNNPACK's elementwise
fusions"). The option is per program, not process-wide: a program whose large fusions
gain from YNNPACK (the CausalTab training step was slower without them) keeps the
defaults.

Options are named by their XLA debug-option names (``jax.jit(...,
compiler_options=...)``). :func:`cpu_options` returns them only where they apply: the
default backend is the CPU and this jaxlib accepts every name and value (a one-off
compile of a scalar program, cached); elsewhere ``None``, so a GPU or a jaxlib that has
renamed an experimental option runs with its defaults instead of failing.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

__all__ = ["YNN_DOTS_ONLY", "cpu_options"]

#: YNNPACK for matrix products only; XLA's loop emitters for elementwise and reduction
#: fusions.
YNN_DOTS_ONLY: tuple[tuple[str, object], ...] = (
    ("xla_cpu_experimental_ynn_fusion_type", "LIBRARY_FUSION_TYPE_DOT"),)


def cpu_options(*groups: tuple[tuple[str, object], ...]) -> dict | None:
    """The union of ``groups`` (tuples of ``(name, value)`` pairs) as a ``compiler_options``
    dict for ``jax.jit``, or ``None`` when the default backend is not the CPU, when
    ``groups`` is empty, or when this jaxlib rejects an option (module docstring).

    Args:
        *groups: option groups such as :data:`YNN_DOTS_ONLY`; later groups override
            earlier ones on the same name.

    Returns:
        A new dict, or ``None``.
    """
    opts = {k: v for g in groups for k, v in g}
    if not opts or jax.default_backend() != "cpu" or not _accepted(tuple(opts.items())):
        return None
    return opts


@functools.cache
def _accepted(items: tuple[tuple[str, object], ...]) -> bool:
    """Whether this jaxlib compiles a scalar program with the options ``items``."""
    try:
        jax.jit(lambda x: x + 1, compiler_options=dict(items)).lower(
            jnp.zeros((), jnp.float32)).compile()
    except (jax.errors.JaxRuntimeError, ValueError, TypeError):
        return False
    return True
