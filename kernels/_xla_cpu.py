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

:func:`cpu_flags` and :func:`has_avx512` say what the CPU offers XLA (kernels that shape
their work to the vector width read them; ``jaxkit.machine`` records the same flags).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp

__all__ = ["ONEDNN_DOTS", "YNN_DOTS_ONLY", "cpu_flags", "cpu_options", "has_avx512"]

#: YNNPACK for matrix products only; XLA's loop emitters for elementwise and reduction
#: fusions.
YNN_DOTS_ONLY: tuple[tuple[str, object], ...] = (
    ("xla_cpu_experimental_ynn_fusion_type", "LIBRARY_FUSION_TYPE_DOT"),)

#: Matrix products (with their fusible neighbours) in oneDNN instead of YNNPACK; YNNPACK
#: keeps the elementwise and reduction fusions. Both options are needed: without
#: ``xla_cpu_use_onednn`` the fusion type is ignored. Experimental in XLA and used by no
#: kernel: about 9% off the GPT training step on an AVX2 machine, but with jaxlib 0.10.2
#: the AIRA-Compose candidates' routed training step compiled with it aborts with heap
#: corruption (benchmarks/RESULTS.md, "oneDNN products"). ``bench_compose --onednn``.
ONEDNN_DOTS: tuple[tuple[str, object], ...] = (
    ("xla_cpu_use_onednn", True),
    ("xla_cpu_experimental_onednn_fusion_type", "LIBRARY_FUSION_TYPE_DOT"))


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


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU feature flags of the first ``flags`` line of ``/proc/cpuinfo`` (or of the
    text ``cpuinfo``); an empty set where there is none (not Linux, not x86)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(val.split())
    return set()


@functools.cache
def has_avx512() -> bool:
    """Whether the CPU has AVX-512 (``avx512f``) and ``XLA_FLAGS`` does not cap XLA's ISA
    below it (``--xla_cpu_max_isa``)."""
    for tok in os.environ.get("XLA_FLAGS", "").split():
        if tok.startswith("--xla_cpu_max_isa=") and not tok.split("=", 1)[1].upper(
                ).startswith("AVX512"):
            return False
    return "avx512f" in cpu_flags()
