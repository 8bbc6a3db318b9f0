"""Jitting for analysis programs: compiled cheaply because they run a few times each.

A pipeline's evaluations, attribution sweeps and one-off analyses run a few times each on
small inputs, so on CPU their compilation costs more than their runs: :func:`analysis_jit`
compiles them with XLA's cheap settings (LLVM at -O0 without its expensive passes, what
``jax_disable_most_optimizations`` does process-wide; the HLO passes, fusion included,
still run), per program and not process-wide. Trainings, whose programs run long, and any
analysis program that runs dozens of times keep XLA's full optimisations (plain
``jax.jit``). First user: :mod:`jaxkit.universal_circuits` (its circuit sweeps'
own-class statistics, which run ~50 times a quick run, stay on ``jax.jit``).
"""

from __future__ import annotations

import jax

__all__ = ["CHEAP_COMPILE", "analysis_jit"]

CHEAP_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def analysis_jit(fn=None, **kw):
    """``jax.jit(fn, **kw)`` compiled with :data:`CHEAP_COMPILE` (usable as a decorator,
    with or without keywords)."""
    if fn is None:
        return lambda f: analysis_jit(f, **kw)
    return jax.jit(fn, compiler_options=CHEAP_COMPILE, **kw)
