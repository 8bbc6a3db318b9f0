"""The thin SVD of a tall matrix from two Gram-matrix eigendecompositions in XLA products
(private helper of :mod:`jaxkit.kernels.ica_whiten`'s ``svd`` whitening).

Why not ``jnp.linalg.svd`` (or ``qr``) of the tall ``(n, d)`` matrix on CPU: those are
LAPACK calls into the BLAS that jaxlib links (OpenBLAS), which starts its own threads for a
matrix of that size; beside XLA:CPU's thread pool and other processes, one such call per
dataset made ``jit(vmap(fastica))`` over 128 datasets of (2000, 10) 2-10x slower than the
same program run with ``OPENBLAS_NUM_THREADS=1`` (benchmarks/RESULTS.md). Here the
``(n, d)`` work is three XLA matrix products; LAPACK only sees ``(d, d)`` matrices.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

__all__ = ["gram_svd"]


def gram_svd(at: Float[Array, "d n"], gram: Float[Array, "d d"] | None = None
             ) -> tuple[Float[Array, "d d"], Float[Array, " d"], Bool[Array, ""]]:
    """Left singular vectors and singular values of ``at`` (d, n), n >= d, by two Gram
    passes: the thin SVD of a tall matrix ``a = at^T`` given in the sample-last layout.

    First pass: ``a^T a = V diag(l) V^T`` (``eigh``), and ``Q1 = a V diag(l)^{-1/2}``,
    whose columns are orthonormal up to about ``eps l_max / l_min``. Second pass:
    ``Q1^T Q1 = W diag(m) W^T``, a matrix near the identity, so ``Q1 = Q2 diag(m)^{1/2}
    W^T`` with ``Q2`` orthonormal to working precision and ``a = Q2 R``,
    ``R = diag(m)^{1/2} W^T diag(l)^{1/2} V^T`` (d x d); the SVD of ``R^T`` gives ``a``'s
    right singular vectors and singular values (as CholeskyQR2 followed by the SVD of
    ``R``: Fukaya, Nakatsukasa, Yanagisawa & Yamamoto, "CholeskyQR2: a simple and
    communication-avoiding algorithm for computing a tall-skinny QR factorization",
    ScalA 2014; the R-SVD of Golub & Van Loan, "Matrix Computations", 4th ed., sec.
    8.6.3). ``a = Q2 R`` holds to rounding (backward error ``eps ||a||``, as an SVD's)
    whenever ``Q2`` is orthonormal, which the second pass guarantees when ``Q1`` is well
    conditioned: ``accurate`` says ``m_min >= 0.01 m_max`` (cond(Q1) <= 10). Measured
    against a float64 LAPACK SVD (d = 10, n = 2000, geometric spectra): relative error of
    the singular values 3e-12 in float64 at condition number 1e6 (accurate up to 1e8), and
    in float32 3e-5 at 1e4, the float32 LAPACK SVD's own error (accurate up to 1e4, not at
    1e5); where it is not accurate the caller takes LAPACK's SVD.

    In the sample-last layout every product contracts or streams contiguous rows of
    ``at``, which XLA:CPU runs as plain products (the (n, d) layout made it transpose an
    operand inside each product; see benchmarks/RESULTS.md).

    Differentiable: yes, in at (distinct singular values; the second pass's eigenvalues
    all lie near 1, so its derivative is ill-conditioned: ``whiten`` differentiates
    LAPACK's SVD instead).

    Args:
        at: the transposed tall matrix, at most as many rows as columns.
        gram: ``at @ at.T`` where the caller has formed it already (shared with its other
            uses); ``None`` forms it here.

    Returns:
        ``(u, s, accurate)``: ``u`` (d, d) with the left singular vectors of ``at`` (the
        right ones of ``a``) as columns, ``s`` the singular values in descending order,
        and whether they are as accurate as an SVD's (``m_min >= 0.01 m_max``).
    """
    d, n = at.shape
    if n < d:
        raise ValueError(f"gram_svd needs at least as many columns as rows; got {at.shape}")
    if gram is None:
        gram = at @ at.T
    tiny = jnp.finfo(at.dtype).tiny
    lam, v = jnp.linalg.eigh(gram)
    lam = jnp.maximum(lam, tiny)
    # the (d, d) factor in its own row-major copy: folded into the product as a
    # transposed operand, it made XLA:CPU take a slower product for (d, d) @ (d, n)
    q1t = jax.lax.optimization_barrier((v * jax.lax.rsqrt(lam)).T) @ at
    mu, w = jnp.linalg.eigh(q1t @ q1t.T)
    # cond(Q1) <= 10: the second pass leaves Q2 orthonormal to about 100 eps (NaN: False)
    accurate = mu[0] >= 1e-2 * mu[-1]
    r = (jnp.sqrt(jnp.maximum(mu, tiny))[:, None] * w.T) @ (jnp.sqrt(lam)[:, None] * v.T)
    u, s, _ = jnp.linalg.svd(r.T)
    return u, s, accurate
