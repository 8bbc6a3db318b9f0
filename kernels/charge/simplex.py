"""Row-wise Euclidean projection onto the probability simplex."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from ..checks import check_finite
from ._unroll import UNROLL_K, ksum

__all__ = ["simplex_rows"]


def simplex_rows(z: Float[Array, "... K"], *, method: str | None = None
                 ) -> tuple[Float[Array, "... K"], Float[Array, "..."]]:
    """Euclidean projection of every row of ``z`` onto the probability simplex.

    ``p = max(z - tau, 0)`` with the row threshold ``tau`` solving ``sum_k p_k = 1``.
    Two exact algorithms:

    * ``method="michelot"``: Michelot's finite algorithm. From the full support,
      ``tau <- (sum_{z > tau} z - 1) / #{z > tau}`` increases monotonically and reaches
      the exact threshold once the support stops shrinking (at most ``K`` passes,
      usually 2-4), computed sort-free with the species axis unrolled so that the passes
      vectorise over rows.
    * ``method="sort"``: the sort-based rule of Duchi et al. with ``u`` the row sorted
      in decreasing order, ``rho = #{j: u_j > (sum_{l <= j} u_l - 1) / j}`` and ``tau =
      (sum_{l <= rho} u_l - 1) / rho``.

    With Michelot the support is found without gradient and ``tau`` is then recomputed
    from it, so ``jax.grad`` sees the exact (almost everywhere) derivative. Unlike
    :func:`optax.projections.projection_simplex` (one simplex for a whole pytree, sorted,
    no threshold returned) this projects rows and returns ``tau``.

    References: Michelot, "A finite algorithm for finding the projection of a point onto
    the canonical simplex of R^n", JOTA 1986; Duchi, Shalev-Shwartz, Singer & Chandra,
    "Efficient projections onto the l1-ball for learning in high dimensions", ICML 2008.

    Differentiable: yes, in z (almost everywhere).

    Args:
        z: ``(..., K)`` rows to project (floating).
        method: ``"michelot"`` or ``"sort"``; the default ``None`` picks ``"michelot"``
            up to 32 species (the unrolled loop grows with ``K``) and ``"sort"`` above.

    Returns:
        ``(p, tau)``: the projected rows ``(..., K)`` and their thresholds ``(...)``.

    Raises:
        ValueError: unknown ``method``, or NaN/inf in ``z`` (a run-time error under jit).
    """
    z = check_finite(jnp.asarray(z), "z")
    return _project_rows(z, method=method)


def _project_rows(z, *, method: str | None = None):
    """:func:`simplex_rows` without the finiteness check (for callers that checked)."""
    k = z.shape[-1]
    if method is None:
        method = "michelot" if k <= UNROLL_K else "sort"
    if method == "sort":
        return _sort(z)
    if method != "michelot":
        raise ValueError(f"`method` must be 'michelot', 'sort' or None; got {method!r}")
    return _michelot(z)


def _michelot(z):
    """Michelot's algorithm with the species unrolled: ``(p, tau)``."""
    k = z.shape[-1]
    zs = [z[..., j] for j in range(k)]
    zc = [lax.stop_gradient(c) for c in zs]

    def body(c):
        _, s, tau = c
        # supports only shrink (as in exact arithmetic), so rounding at z ~ tau cannot
        # make the loop cycle: it ends after at most K passes
        s_new = [sj & (c > tau) for sj, c in zip(s, zc, strict=True)]
        sf = [sj.astype(z.dtype) for sj in s_new]
        tau_new = (ksum([sj * c for sj, c in zip(sf, zc, strict=True)]) - 1) / ksum(sf)
        same = jnp.all(jnp.stack([a == b for a, b in zip(s_new, s, strict=True)]))
        return same, s_new, tau_new

    tau0 = (ksum(zc) - 1) / k
    full = [jnp.ones(tau0.shape, bool)] * k
    _, s, _ = lax.while_loop(lambda c: ~c[0], body, (jnp.zeros((), bool), full, tau0))
    # tau recomputed on the final support, differentiably
    sf = [lax.stop_gradient(sj.astype(z.dtype)) for sj in s]
    tau = (ksum([sj * c for sj, c in zip(sf, zs, strict=True)]) - 1) / ksum(sf)
    return jnp.maximum(z - tau[..., None], 0), tau


def _sort(z):
    """Sort-based simplex projection of rows (Duchi et al. 2008): ``(p, tau)``."""
    k = z.shape[-1]
    u = -jnp.sort(-z, axis=-1)
    css = jnp.cumsum(u, axis=-1) - 1
    idx = jnp.arange(1, k + 1, dtype=z.dtype)
    rho = jnp.sum(u - css / idx > 0, axis=-1)  # >= 1: the largest entry always passes
    tau = jnp.take_along_axis(css, jnp.maximum(rho, 1)[..., None] - 1, axis=-1)[..., 0]
    tau = tau / jnp.maximum(rho, 1).astype(z.dtype)
    return jnp.maximum(z - tau[..., None], 0), tau
