"""Sums and maxima over the species axis written out term by term.

The charge kernels keep the species of an ``(N, K)`` cell as a Python list of ``K``
arrays over atoms when ``K`` is small, so that XLA fuses a ``K``-term sum into one
elementwise loop over atoms instead of reducing over a short minor axis.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["UNROLL_K", "kmax", "ksum"]

#: the default largest number of species for which the species axis is unrolled
UNROLL_K = 32


def ksum(terms):
    """Sum of a Python list of equal-shape arrays, as a chain of elementwise adds."""
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def kmax(terms):
    """Elementwise maximum of a Python list of equal-shape arrays."""
    out = terms[0]
    for t in terms[1:]:
        out = jnp.maximum(out, t)
    return out
