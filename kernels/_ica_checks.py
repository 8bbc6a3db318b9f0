"""The input check of a FastICA fit without its own pass over the data (private helper of
:mod:`jaxkit.kernels.ica`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .checks import fail_first

__all__ = ["screened_check", "screened_flags"]


def screened_flags(x, mean, ss):
    """:func:`check_data_matrix`'s value checks on ``x`` as flags ``(nonfinite,
    constant)``, without their pass over the data in the common case: finite column means
    and sums of squares ``ss`` of the centred columns (the diagonal of the Gram matrix the
    whitening forms anyway) prove ``x`` finite, and a column with ``2 sd > 10 eps
    max(|mean| + sqrt(ss), 1)`` (``sd = sqrt(ss / n)``) cannot be constant, since its range
    is at least ``2 sd`` and ``|x_ij| <= |mean_j| + sqrt(ss_j)``. Only when that screen
    fails is the exact max/min check run (``lax.cond``)."""
    n = x.shape[0]
    sd = jnp.sqrt(ss / n)
    eps = jnp.finfo(x.dtype).eps
    fast = (jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(ss))
            & jnp.all(2 * sd > 10 * eps * jnp.maximum(jnp.abs(mean) + jnp.sqrt(ss), 1.0)))

    def exact():
        hi, lo = jnp.max(x, axis=0), jnp.min(x, axis=0)
        nonfinite = ~jnp.all(jnp.isfinite(hi) & jnp.isfinite(lo))
        scale = jnp.maximum(jnp.maximum(jnp.abs(hi), jnp.abs(lo)), 1.0)
        return nonfinite, jnp.any(hi - lo <= 10 * eps * scale)

    false = jnp.asarray(False)
    return jax.lax.cond(fast, lambda: (false, false), exact)


def screened_check(x, mean, ss, out):
    """:func:`screened_flags` as checks attached to ``out`` (``equinox.error_if`` under
    ``jit``, see :mod:`jaxkit.kernels.checks`)."""
    nonfinite, const = screened_flags(x, mean, ss)
    return fail_first(out, [(nonfinite, "`x` contains NaN or inf values"),
                            (const, "`x` has a constant column (zero variance); drop it "
                                    "before fitting")])
