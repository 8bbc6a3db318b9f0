"""Theory checks for pooled sources: excess kurtosis, correlation of squares, HSIC and
the closed-form moments under atomic variance-scaling interventions."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["excess_kurtosis", "square_correlation", "mean_offdiag", "hsic",
           "atomic_scale_theory"]


def excess_kurtosis(e: Float[Array, "n d"]) -> Float[Array, " d"]:
    """Sample excess kurtosis ``m4 / m2^2 - 3`` of every column, with the central
    moments ``m_k = mean((e - mean e)^k)`` (0 for a Gaussian).

    Differentiable: yes, in e.

    Args:
        e: samples ``(n, d)``, one row per sample.

    Returns:
        The excess kurtosis of each column, ``(d,)``.
    """
    c = e - jnp.mean(e, axis=0)
    m2 = jnp.mean(c * c, axis=0)
    m4 = jnp.mean(c ** 4, axis=0)
    return m4 / (m2 * m2) - 3.0


def square_correlation(e: Float[Array, "n d"]) -> Float[Array, "d d"]:
    """Pearson correlation matrix of the squared, centred columns, ``corr(e_i^2, e_j^2)``.

    Uncorrelated sources can still be dependent; for sources that are scale mixtures
    (variance-changing interventions) the dependence shows up exactly here. Zero off the
    diagonal for independent sources (up to sampling error ~ ``1/sqrt(n)``).

    Differentiable: yes, in e.

    Args:
        e: samples ``(n, d)``, one row per sample.

    Returns:
        The ``(d, d)`` correlation matrix of ``(e - mean e)^2``.
    """
    c = e - jnp.mean(e, axis=0)
    s = c * c
    s = s - jnp.mean(s, axis=0)
    cov = s.T @ s / s.shape[0]
    sd = jnp.sqrt(jnp.diagonal(cov))
    return cov / (sd[:, None] * sd[None, :])


def mean_offdiag(m: Float[Array, "d d"]) -> Float[Array, ""]:
    """Mean of the off-diagonal entries of a square matrix (signed),
    ``sum_{i != j} m_ij / (d (d - 1))``.

    Differentiable: yes, in m.

    Args:
        m: square matrix ``(d, d)``.

    Returns:
        The scalar mean (0 for ``d = 1``).
    """
    d = m.shape[-1]
    off = ~jnp.eye(d, dtype=bool)
    return jnp.sum(jnp.where(off, m, 0.0)) / max(d * (d - 1), 1)


def hsic(a: Float[Array, " n"], b: Float[Array, " n"], *,
         bandwidth_a=None, bandwidth_b=None) -> Float[Array, ""]:
    """Biased (V-statistic) HSIC with Gaussian kernels, ``tr(K H L H) / n^2``.

    Bandwidths default to the median pairwise distance (median heuristic). Costs
    ``O(n^2)`` memory: pass a subsample of rows (shuffled: pooled rows are ordered by
    environment). Positive bias ~ ``1/n`` even for independent inputs, so compare
    against a permutation of one argument.

    Reference: A. Gretton, O. Bousquet, A. Smola, B. Scholkopf, "Measuring statistical
    dependence with Hilbert-Schmidt norms", ALT 2005.

    Differentiable: yes, in a and b.

    Args:
        a: first sample ``(n,)``.
        b: second sample ``(n,)``, paired with ``a``.
        bandwidth_a: Gaussian-kernel bandwidth for ``a``; ``None``: median heuristic.
        bandwidth_b: Gaussian-kernel bandwidth for ``b``; ``None``: median heuristic.

    Returns:
        The scalar HSIC estimate ``tr(K H L H) / n^2`` (``H`` the centring matrix).
    """
    a = jnp.asarray(a)
    b = jnp.asarray(b)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"`a` and `b` must be 1-D of equal length; got {a.shape}, {b.shape}")
    n = a.shape[0]

    def gram(v, bw):
        d2 = (v[:, None] - v[None, :]) ** 2
        if bw is None:
            bw = jnp.sqrt(jnp.median(d2))
        bw = jnp.maximum(bw, jnp.finfo(d2.dtype).tiny)
        return jnp.exp(-d2 / (2.0 * bw * bw))

    k = gram(a, bandwidth_a)
    lm = gram(b, bandwidth_b)
    kc = k - jnp.mean(k, axis=0) - jnp.mean(k, axis=1)[:, None] + jnp.mean(k)
    return jnp.sum(kc * lm) / (n * n)


def atomic_scale_theory(n_nodes, strength, n_envs_total=None):
    """Closed-form moments of the pooled sources for Gaussian noise and atomic
    variance-scaling interventions, each node targeted in exactly one of ``K``
    equally sized environments (default ``K = n_nodes + 1``: one observational plus one
    per node, as :func:`simulate_pooled` with ``n_envs = d`` and ``target_choice="cycle"``).

    With ``p = 1/K``, ``s = strength``, ``m2 = 1 + p (s^2 - 1)``, ``m4 = 1 + p (s^4 - 1)``:

    * excess kurtosis ``3 m4 / m2^2 - 3 = 3 p (1 - p) (s^2 - 1)^2 / m2^2`` -- ``O(1/n)``;
    * ``corr(e_i^2, e_j^2) = -p^2 (s^2 - 1)^2 / (3 m4 - m2^2)`` -- ``O(1/n^2)``.

    Differentiable: yes, in strength.

    Args:
        n_nodes: number of nodes ``d``.
        strength: the intervention's scale factor ``s``.
        n_envs_total: number of environments ``K`` (default ``n_nodes + 1``).

    Returns:
        ``(excess_kurtosis, square_correlation)`` of one pooled source; broadcasts over
        array inputs.
    """
    n_nodes = jnp.asarray(n_nodes, jnp.result_type(float))
    k = n_nodes + 1.0 if n_envs_total is None else jnp.asarray(n_envs_total, n_nodes.dtype)
    p = 1.0 / k
    s2 = jnp.asarray(strength, n_nodes.dtype) ** 2
    m2 = 1.0 + p * (s2 - 1.0)
    m4 = 1.0 + p * (s2 * s2 - 1.0)
    kurt = 3.0 * m4 / (m2 * m2) - 3.0
    corr = -(p * (s2 - 1.0)) ** 2 / (3.0 * m4 - m2 * m2)
    return kurt, corr
