"""Coverage and diversity metrics of a set of generated samples.

All functions are pure JAX (``jit``/``vmap``-able), take a fixed-shape batch plus an
optional boolean ``mask`` of the rows that count (e.g. the valid samples), and work for
three distances: ``"euclidean"`` on feature vectors ``(n, d)``, ``"hamming"`` on token
arrays ``(n, L)`` (number of differing positions) and ``"tanimoto"`` on binary
fingerprints ``(n, F)`` (``1 - |a & b| / |a | b|``, Jaccard / Tanimoto distance; two
empty rows are at distance 0).

* :func:`validity`, :func:`uniqueness`, :func:`novelty`: the usual generative-model
  rates (valid share; share of distinct valid samples; share of valid samples farther
  than a threshold from the training set).
* :func:`circles`: greedy #Circles (Xie et al. 2023, "How much space has been
  explored? Measuring the chemical space covered by databases and machine-generated
  molecules", ICLR 2023): the number of samples that can be kept so that every pair is
  farther apart than a threshold; the greedy pass in index order gives a lower bound of
  the exact (NP-hard) packing number.
* :func:`knn_coverage`: coverage of Naeem et al. 2020 ("Reliable fidelity and diversity
  metrics for generative models", ICML): share of reference points whose k-NN ball
  (radius = distance to their k-th nearest reference neighbour) holds a sample.
* :func:`vendi_score`, :func:`vendi_from_kernel`: Vendi score (Friedman & Dieng 2023,
  "The Vendi score: a diversity evaluation metric for machine learning", TMLR):
  ``exp(-sum_i l_i log l_i)`` over the eigenvalues ``l_i`` of ``K / n`` for a similarity
  kernel with ``K_ii = 1``.
* :func:`exact_coverage`: where the valid set is known, the (weighted) share of a dense
  reference discretisation of it within radius ``r`` of some sample.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float, Int

__all__ = ["pairwise_distances", "squared_distances", "validity", "uniqueness", "novelty",
           "circles", "knn_radii", "knn_coverage", "vendi_from_kernel", "vendi_score",
           "exact_coverage"]

METRICS = ("euclidean", "hamming", "tanimoto")


def _mask(x, mask):
    n = x.shape[0]
    if mask is None:
        return jnp.ones((n,), bool)
    mask = jnp.asarray(mask)
    if mask.shape != (n,) or mask.dtype != jnp.bool_:
        raise ValueError(f"`mask` must be a boolean array of shape ({n},); got "
                         f"{mask.dtype} {mask.shape}")
    return mask


def pairwise_distances(a: Array, b: Array, metric: str = "euclidean") -> Float[Array, "n m"]:
    """Distances between the rows of ``a`` (n, ...) and ``b`` (m, ...).

    ``"euclidean"``: ``||a_i - b_j||_2`` on flattened rows; ``"hamming"``: number of
    positions where the token rows differ."""
    if metric not in METRICS:
        raise ValueError(f"`metric` must be one of {METRICS}; got {metric!r}")
    a = jnp.reshape(a, (a.shape[0], -1))
    b = jnp.reshape(b, (b.shape[0], -1))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"rows of `a` and `b` differ in size: {a.shape} vs {b.shape}")
    if metric == "hamming":
        return jnp.sum(a[:, None, :] != b[None, :, :], axis=-1).astype(jnp.float32)
    if metric == "tanimoto":
        a, b = (jnp.asarray(v, jnp.float32) for v in (a, b))
        inter = a @ b.T
        union = jnp.sum(a, 1)[:, None] + jnp.sum(b, 1)[None, :] - inter
        return jnp.where(union > 0, 1.0 - inter / jnp.maximum(union, 1e-9), 0.0)
    sq = squared_distances(a, b)
    # the square root's gradient is infinite at 0, and the Gram form below can round a
    # coincident pair to <= 0: such pairs get distance 0 with gradient 0, not NaN
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def squared_distances(a: Array, b: Array) -> Float[Array, "n m"]:
    """Squared Euclidean distances ``||a_i - b_j||^2`` between the flattened rows of ``a``
    and ``b``, in the Gram form ``|a|^2 + |b|^2 - 2 a.b`` clipped at 0 (smooth where
    :func:`pairwise_distances` is not: use it under ``grad``)."""
    a = jnp.reshape(a, (a.shape[0], -1))
    b = jnp.reshape(b, (b.shape[0], -1))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"rows of `a` and `b` differ in size: {a.shape} vs {b.shape}")
    a = a.astype(jnp.result_type(a.dtype, jnp.float32))
    b = b.astype(a.dtype)
    sq = (jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :] - 2.0 * a @ b.T)
    return jnp.maximum(sq, 0.0)


def validity(valid: Bool[Array, " n"]) -> Float[Array, ""]:
    """Share of valid samples."""
    return jnp.mean(jnp.asarray(valid, jnp.float32))


def circles(x: Array, threshold: float, mask: Bool[Array, " n"] | None = None,
            metric: str = "euclidean") -> tuple[Int[Array, ""], Bool[Array, " n"]]:
    """Greedy #Circles (Xie et al. 2023): walk the rows in order and keep a row when it is
    farther than ``threshold`` from every row kept so far. Returns (count, kept mask);
    the kept rows are pairwise farther apart than ``threshold``."""
    m = _mask(x, mask)
    d = pairwise_distances(x, x, metric)

    def body(kept, i):
        ok = m[i] & ~jnp.any(kept & (d[i] <= threshold))
        return kept.at[i].set(ok), None

    kept, _ = lax.scan(body, jnp.zeros_like(m), jnp.arange(x.shape[0]))
    return jnp.sum(kept), kept


def uniqueness(x: Array, mask: Bool[Array, " n"] | None = None, tol: float = 0.0,
               metric: str = "euclidean") -> Float[Array, ""]:
    """Share of distinct rows among the masked rows (rows within ``tol`` of an earlier
    kept row are duplicates). 0 when no row is masked."""
    m = _mask(x, mask)
    count, _ = circles(x, tol, m, metric)
    return count / jnp.maximum(jnp.sum(m), 1)


def novelty(x: Array, train: Array, threshold: float = 0.0,
            mask: Bool[Array, " n"] | None = None,
            metric: str = "euclidean") -> Float[Array, ""]:
    """Share of the masked rows farther than ``threshold`` from every training row."""
    m = _mask(x, mask)
    dmin = jnp.min(pairwise_distances(x, train, metric), axis=1)
    return jnp.sum(m & (dmin > threshold)) / jnp.maximum(jnp.sum(m), 1)


def knn_radii(reference: Array, k: int = 5, metric: str = "euclidean") -> Float[Array, " m"]:
    """The k-NN ball radii of :func:`knn_coverage`: per reference row, the distance to its
    k-th nearest other reference row. They depend on the reference only: compute them
    once and pass them as ``radii`` (an (m, m) sort per call otherwise)."""
    if not 1 <= k < reference.shape[0]:
        raise ValueError(f"`k` must be in [1, {reference.shape[0] - 1}]; got {k}")
    drr = pairwise_distances(reference, reference, metric)
    return jnp.sort(drr, axis=1)[:, k]  # column 0 is the row itself


def knn_coverage(reference: Array, x: Array, k: int = 5,
                 mask: Bool[Array, " n"] | None = None,
                 metric: str = "euclidean", radii: Array | None = None) -> Float[Array, ""]:
    """Naeem et al. (2020) coverage: share of reference rows whose ball of radius
    "distance to the k-th nearest other reference row" contains a masked sample.
    ``radii``: those radii precomputed by :func:`knn_radii` (same ``k`` and metric)."""
    m = _mask(x, mask)
    radius = knn_radii(reference, k, metric) if radii is None else radii
    drx = jnp.where(m[None, :], pairwise_distances(reference, x, metric), jnp.inf)
    return jnp.mean(jnp.any(drx <= radius[:, None], axis=1).astype(jnp.float32))


def vendi_from_kernel(K: Float[Array, "n n"],
                      mask: Bool[Array, " n"] | None = None) -> Float[Array, ""]:
    """Vendi score ``exp(-sum l log l)``, ``l`` the eigenvalues of ``K / n`` over the
    masked rows (``K`` symmetric PSD with unit diagonal). 0 rows masked gives 0."""
    m = _mask(K, mask)
    n = jnp.sum(m)
    Km = jnp.where(m[:, None] & m[None, :], K, 0.0) / jnp.maximum(n, 1)
    lam = jnp.clip(jnp.linalg.eigvalsh(Km), 0.0, None)
    ent = -jnp.sum(jnp.where(lam > 1e-12, lam * jnp.log(jnp.where(lam > 1e-12, lam, 1.0)),
                             0.0))
    return jnp.where(n > 0, jnp.exp(ent), 0.0)


def vendi_score(x: Array, mask: Bool[Array, " n"] | None = None, bandwidth: float = 1.0,
                metric: str = "euclidean") -> Float[Array, ""]:
    """Vendi score with an RBF kernel ``exp(-d^2 / (2 h^2))`` (euclidean), the share of
    equal positions ``1 - d / L`` (hamming; a mean of indicator kernels, so PSD) or the
    Tanimoto similarity ``1 - d`` (tanimoto; PSD on binary vectors)."""
    d = pairwise_distances(x, x, metric)
    if metric == "tanimoto":
        K = 1.0 - d
    elif metric == "hamming":
        K = 1.0 - d / jnp.reshape(x, (x.shape[0], -1)).shape[1]
    else:
        K = jnp.exp(-jnp.square(d) / (2.0 * bandwidth ** 2))
    return vendi_from_kernel(K, mask)


def exact_coverage(reference: Array, x: Array, radius: float,
                   mask: Bool[Array, " n"] | None = None,
                   weights: Float[Array, " m"] | None = None,
                   metric: str = "euclidean") -> Float[Array, ""]:
    """Weighted share of ``reference`` rows (a dense discretisation of the valid set, with
    ``weights`` its length/area elements) within ``radius`` of some masked sample."""
    m = _mask(x, mask)
    d = jnp.where(m[None, :], pairwise_distances(reference, x, metric), jnp.inf)
    hit = jnp.any(d <= radius, axis=1).astype(jnp.float32)
    w = jnp.ones_like(hit) if weights is None else jnp.asarray(weights, hit.dtype)
    return jnp.sum(w * hit) / jnp.sum(w)

