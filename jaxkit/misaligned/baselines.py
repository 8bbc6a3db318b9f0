"""The misaligned baseline family: pure functions of (features, labels, split, key),
vmapped over seeds and perturbation strengths.

Each baseline predicts every molecule (metrics read the test rows). With :math:`w` the
0/1 training mask:

* ``train_mean``: :math:`\\hat y = \\bar y_w`.
* ``size_only``: least squares on molecular size (``MolWt``, ``HeavyAtomCount``) with an
  intercept.
* The *physics-aligned references* (:data:`PHYSICS`; never misaligned baselines, never
  chosen as the "best misaligned baseline"), ridge (:func:`linear_ridge`, penalty
  ``1e-3``, standardised on the training rows) on RDKit descriptors:
  ``descriptors``, all four (``MolWt``, ``HeavyAtomCount``, ``TPSA``, Crippen
  ``MolLogP``); ``descriptors_no_logp``, the same without logP (size and TPSA); and
  ``logp_only``, Crippen logP alone. Crippen logP is the physics of solubility itself
  (ESOL's main term; Delaney, J. Chem. Inf. Comput. Sci. 44, 1000, 2004) and TPSA a
  polarity descriptor, so a model losing to them has not been exposed by a misaligned
  signal; both variants of the descriptor ridge are reported so that the effect of
  logP is visible.
* ``label_scramble``: fingerprint ridge fitted to training labels permuted among the
  training molecules (Y-scrambling, the permuted-label null: it must score at chance,
  :math:`R^2 \\le 0` in expectation).
* ``shuffled_inputs`` (strength :math:`p`): a random fraction :math:`p` of the molecules
  swap fingerprints among themselves before the fingerprint ridge; :math:`p = 1` breaks
  every structure-label link.
* ``replaced_bits`` (strength :math:`p`): each fingerprint bit replaced, with probability
  :math:`p`, by a Bernoulli bit of the data's bit density; ``random_features`` is
  :math:`p = 1` drawn independently: random inputs of the same dimension and density.
* ``nn_tanimoto``: the label of the most similar training molecule by Tanimoto similarity
  on the fingerprints (:func:`jaxkit.kernels.fingerprint.nearest_neighbour_predict`).
* ``carbon_inserted`` (strength :math:`k`): the fingerprint ridge fitted on the true
  training molecules, queried with test molecules that had :math:`k` carbons inserted
  into their SMILES (:func:`jaxkit.misaligned.features.add_carbon`): a perturbation of
  the *test inputs*, so a model whose error does not move when the molecule changes is
  not reading the structure. This is not Renz et al.'s AddCarbon, a *generative*
  baseline (training molecules with a carbon inserted, offered as "novel" molecules),
  which lives in :mod:`jaxkit.misaligned.addcarbon`.
* ``noise_ceiling``: the labels plus Gaussian noise of the stated experimental error
  :math:`\\sigma` (Crusius et al., ChemRxiv 2024): the error of a perfect model of the
  true values measured against noisy labels; no model is expected to beat it.

The *fingerprint ridge* is linear ridge regression with an unpenalised intercept in
its dual (kernel) form on the Gram matrix :math:`G = X X^\\top` (:func:`kernel_ridge`):
the Gram matrix is computed once per data set and shared by every seed (permuting
molecules permutes :math:`G`), so 100 seeds cost 100 ``n x n`` Cholesky solves, not 100
fits on the raw fingerprints. ``ridge_fp`` (the ridge on the true fingerprints) is
reported as the aligned reference, not as a misaligned baseline.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve, solve
from jaxtyping import Array, Bool, Float

from jaxkit.kernels import fingerprint as kfp
from jaxkit.kernels._threefry import unrolled_key

__all__ = ["BASELINES", "MISALIGNED", "ALIGNED", "PHYSICS", "CURVES", "FamilyData",
           "FamilySettings", "linear_ridge", "kernel_ridge", "family_data",
           "baseline_family", "run_family"]

#: every output of :func:`baseline_family` (curves carry a leading strength axis)
BASELINES = ("train_mean", "size_only", "descriptors", "descriptors_no_logp", "logp_only",
             "label_scramble", "shuffled_inputs", "replaced_bits", "random_features",
             "nn_tanimoto", "carbon_inserted", "noise_ceiling", "ridge_fp")
#: the misaligned baselines a model is compared with (curves at their strongest setting)
MISALIGNED = ("train_mean", "size_only", "label_scramble", "shuffled_inputs",
              "random_features", "nn_tanimoto", "carbon_inserted")
#: the physics-aligned references: ridge on the four descriptors (size, TPSA, Crippen
#: logP), on size and TPSA without logP, and on Crippen logP alone
PHYSICS = ("descriptors", "descriptors_no_logp", "logp_only")
#: the aligned references reported beside the misaligned family, never chosen as its best:
#: the fingerprint ridge and the physics-aligned references
ALIGNED = ("ridge_fp", *PHYSICS)
CURVES = ("shuffled_inputs", "replaced_bits", "carbon_inserted")


class FamilyData(NamedTuple):
    """The arrays every seed shares: labels ``y`` (n,), descriptors ``desc`` (n, 4),
    fingerprints ``fp`` (n, d) float32 0/1, ``gram`` = fp fp^T, ``sim`` the Tanimoto
    matrix, ``addc_gram`` (K, V, n, n) the Gram matrices of V carbon-inserted variants at K
    strengths against the true fingerprints (rows: perturbed molecules), ``sigma`` the
    stated experimental error."""

    y: Float[Array, " n"]
    desc: Float[Array, "n 4"]
    fp: Float[Array, "n d"]
    gram: Float[Array, "n n"]
    sim: Float[Array, "n n"]
    addc_gram: Float[Array, "K V n n"]
    sigma: Float[Array, ""]


class FamilySettings(NamedTuple):
    """Static settings: the ridge penalty ``lam`` of the fingerprint ridge, the strengths
    of the two fraction curves (``fractions``) and the number of carbon-inserted variants."""

    lam: float = 3.0
    fractions: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def linear_ridge(x: Float[Array, "n d"], y: Float[Array, " n"], train: Bool[Array, " n"],
                 lam: float = 0.0, standardise: bool = True) -> Float[Array, " n"]:
    """Ridge regression with an unpenalised intercept in the primal (``d x d``) form,
    fitted on the rows ``train``; predictions for all rows.

    :math:`\\beta = (\\tilde X^\\top W \\tilde X + \\lambda I)^{-1} \\tilde X^\\top W
    (y - \\bar y_w)`, :math:`\\tilde X` the columns centred (and, with ``standardise``,
    scaled) by their training mean and standard deviation. ``lam = 0`` is ordinary least
    squares (a tiny ``1e-6 n`` jitter keeps it solvable)."""
    w = train.astype(x.dtype)
    nt = jnp.sum(w)
    mu = (w @ x) / nt
    xc = x - mu
    if standardise:
        sd = jnp.sqrt((w @ xc ** 2) / nt)
        xc = xc / jnp.where(sd > 0, sd, 1.0)
    ybar = (w @ y) / nt
    a = (xc * w[:, None]).T @ xc + (lam + 1e-6 * nt) * jnp.eye(x.shape[1], dtype=x.dtype)
    beta = jnp.linalg.solve(a, (xc * w[:, None]).T @ (y - ybar))
    return xc @ beta + ybar


def kernel_ridge(gram: Float[Array, "n n"], y: Float[Array, " n"], train: Bool[Array, " n"],
                 lam: float, query_gram: Float[Array, "q n"] | None = None
                 ) -> Float[Array, " q"]:
    """Linear ridge with an unpenalised intercept in dual form, from the Gram matrix.

    With :math:`a = G w / n_t`, :math:`c = w^\\top G w / n_t^2` the centred Gram matrix is
    :math:`G^c_{ij} = G_{ij} - a_i - a_j + c` (inner products of training-mean-centred
    features); :math:`\\alpha = (W G^c W + \\lambda I)^{-1} W (y - \\bar y_w)` and
    :math:`\\hat y_q = G^c_{q\\cdot} W \\alpha + \\bar y_w`. Equal to the primal ridge on
    the features behind :math:`G` (tested).

    Args:
        gram: ``(n, n)`` inner products of the features.
        y: ``(n,)`` labels (only training rows are read).
        train: ``(n,)`` training mask.
        lam: the ridge penalty (> 0).
        query_gram: ``(q, n)`` inner products of query features with the ``n`` molecules;
            ``None``: the molecules themselves.

    Returns:
        ``(q,)`` predictions.
    """
    cen = _centre(gram, train)
    ybar = (cen.w @ y) / cen.nt
    alpha = solve(_dual_matrix(cen, lam), cen.w * (y - ybar), assume_a="pos")
    return _dual_predict(cen, alpha, ybar, query_gram)


class _Centred(NamedTuple):
    """The label-free parts of :func:`kernel_ridge` for one Gram matrix and training
    mask: the centred Gram matrix ``gc``, ``a``, ``c``, the 0/1 weights ``w`` and their
    sum ``nt``."""

    gc: Array
    a: Array
    c: Array
    w: Array
    nt: Array


def _centre(gram, train) -> _Centred:
    w = train.astype(gram.dtype)
    nt = jnp.sum(w)
    a = gram @ w / nt
    c = w @ a / nt
    return _Centred(gram - a[:, None] - a[None, :] + c, a, c, w, nt)


def _dual_matrix(cen: _Centred, lam: float):
    w = cen.w
    return cen.gc * (w[:, None] * w[None, :]) + lam * jnp.eye(w.shape[0], dtype=w.dtype)


def _dual_predict(cen: _Centred, alpha, ybar, query_gram=None):
    if query_gram is None:
        qc = cen.gc
    else:
        qc = query_gram - (query_gram @ cen.w / cen.nt)[:, None] - cen.a[None, :] + cen.c
    return qc @ (cen.w * alpha) + ybar


def family_data(y, desc, fp, addc_fp, sigma: float) -> FamilyData:
    """:class:`FamilyData` from NumPy arrays; ``addc_fp`` is ``(K, V, n, d)`` (carbon-inserted
    fingerprints). Computes the Gram and Tanimoto matrices once."""
    f = jnp.asarray(fp, jnp.float32)
    hp = jax.lax.Precision.HIGHEST
    ac = jnp.asarray(addc_fp, jnp.float32)
    return FamilyData(y=jnp.asarray(y, jnp.float32), desc=jnp.asarray(desc, jnp.float32),
                      fp=f, gram=jnp.matmul(f, f.T, precision=hp),
                      sim=kfp.tanimoto_matrix(f),
                      addc_gram=jnp.einsum("kvnd,md->kvnm", ac, f, precision=hp),
                      sigma=jnp.asarray(sigma, jnp.float32))


def _permute_fraction(key, n: int, p, train=None):
    """A permutation of ``range(n)`` that moves a random fraction ``p`` of the entries
    among themselves (the rest stay in place)."""
    k1, k2 = jax.random.split(key)
    chosen = jax.random.uniform(k1, (n,)) < p
    # the chosen entries, in a random order, fill the chosen slots in index order
    order = jnp.argsort(jnp.where(chosen, jax.random.uniform(k2, (n,)), 2.0))
    slots = jnp.argsort(jnp.where(chosen, jnp.arange(n), n + jnp.arange(n)))
    perm = jnp.arange(n).at[slots].set(order)
    return jnp.where(chosen, perm, jnp.arange(n))


def _scramble_labels(key, y, train):
    """``y`` with the training labels permuted among the training molecules."""
    n = y.shape[0]
    order = jnp.argsort(jnp.where(train, jax.random.uniform(key, (n,)), 2.0))
    slots = jnp.argsort(jnp.where(train, jnp.arange(n), n + jnp.arange(n)))
    return y.at[slots].set(y[order]) * train + y * ~train


def _each(f, *xs):
    """``f`` over the leading axis of ``xs``, one member after another (``lax.map``): the
    strengths' Cholesky solves stay unbatched. Batched LAPACK calls under ``vmap`` hang
    XLA:CPU at random on small machines (kernels/_batching.py; the 100-seed benchmark
    hung with the strengths vmapped)."""
    return jax.lax.map(lambda a: f(*a), xs)


def _uniform(key, shape: tuple[int, ...]):
    """``jax.random.uniform(key, shape)``, the same numbers, drawn through the unrolled
    Threefry of ``kernels._threefry`` (JAX's rolled CPU loop cost 11 ms per 642 x 2048
    draw; unrolled, XLA fuses the hash with the comparisons and the ``where`` of the
    replaced bits: about 2 ms). Other generators and float64 draws take JAX's path."""
    return jax.random.uniform(unrolled_key(key), shape)


def _replaced_inputs(key, fp, p, density, *, everything: bool = False):
    """The fingerprints ``fp`` with each bit replaced, with probability ``p``, by a
    Bernoulli(``density``) bit: ``k1, k2 = split(key)``; replaced where
    ``uniform(k1) < p``, the new bit ``uniform(k2) < density``. ``everything``
    (static): ``p >= 1``, every bit replaced (``uniform(k1) < 1`` always holds, so
    ``k1``'s draw is skipped: the same numbers)."""
    k1, k2 = jax.random.split(key)
    noise = (_uniform(k2, fp.shape) < density).astype(fp.dtype)
    if everything:
        return noise
    return jnp.where(_uniform(k1, fp.shape) < p, noise, fp)


def _bit_gram(x, blocks: int = 4):
    """``x @ x.T`` for 0/1 float32 ``x`` from its upper block triangle: the rows in
    ``blocks`` parts, the ``blocks (blocks + 1) / 2`` products of part ``i`` with part
    ``j >= i``, the lower blocks their transposes (5/8 of the multiply-adds at 4
    blocks; about 0.7x the CPU time of one product at 642 x 2048). Every entry is a sum
    of 0/1 products, an integer below ``2**24`` for fewer than ``2**24`` columns, so
    float32 holds it exactly in any summation order: the same matrix as ``x @ x.T``
    (tested)."""
    n = x.shape[0]
    size = -(-n // blocks)
    parts = [x[i:i + size] for i in range(0, n, size)]
    m = len(parts)
    prods = {(i, j): parts[i] @ parts[j].T for i in range(m) for j in range(i, m)}
    return jnp.block([[prods[(i, j)] if j >= i else prods[(j, i)].T for j in range(m)]
                      for i in range(m)])


def baseline_family(key, data: FamilyData, train: Bool[Array, " n"],
                    settings: FamilySettings = FamilySettings()) -> dict[str, Array]:
    """Every baseline of :data:`BASELINES` for one seed: ``{name: (n,) predictions}``,
    curves ``(strengths, n)`` (``shuffled_inputs``, ``replaced_bits``:
    ``settings.fractions``; ``carbon_inserted``: one row per insertion strength, variant
    ``fold_in(key)``-chosen). Pure; map it over seeds (:func:`run_family`). The strengths
    run one after another (:func:`_each`).

    Work that does not depend on a strength is done once, with the same numbers as
    doing it per strength: ``ridge_fp``, ``label_scramble`` and ``carbon_inserted`` share
    one Cholesky factor (one Gram matrix, one training mask; ``carbon_inserted`` the ridge's
    very coefficients); a fraction 0 of shuffled molecules or replaced bits leaves the
    Gram matrix as it is, so that point of both curves is ``ridge_fp``; at a fraction
    >= 1 every bit is replaced, so the replacement mask is not drawn. The replaced bits
    are drawn with :func:`_uniform` (``jax.random.uniform``'s numbers, fused)."""
    n = data.y.shape[0]
    lam = settings.lam
    fracs = tuple(float(p) for p in settings.fractions)
    ks = jax.random.split(key, 6)
    out = {"train_mean": jnp.full((n,), jnp.sum(data.y * train) / jnp.sum(train))}
    out["size_only"] = linear_ridge(data.desc[:, :2], data.y, train, 0.0)
    out["descriptors"] = linear_ridge(data.desc, data.y, train, 1e-3)
    out["descriptors_no_logp"] = linear_ridge(data.desc[:, :3], data.y, train, 1e-3)
    out["logp_only"] = linear_ridge(data.desc[:, 3:], data.y, train, 1e-3)
    # one factor of W G^c W + lam I for the three baselines on the true Gram matrix
    cen = _centre(data.gram, train)
    factor = cho_factor(_dual_matrix(cen, lam))

    def fit(yy):
        ybar = (cen.w @ yy) / cen.nt
        return cho_solve(factor, cen.w * (yy - ybar)), ybar

    alpha, ybar = fit(data.y)
    out["ridge_fp"] = _dual_predict(cen, alpha, ybar)
    out["label_scramble"] = _dual_predict(
        cen, *fit(_scramble_labels(ks[0], data.y, train)))

    def shuffled(k, p):
        perm = _permute_fraction(k, n, p)
        return kernel_ridge(data.gram[perm][:, perm], data.y, train, lam)

    out["shuffled_inputs"] = _curve(shuffled, jax.random.split(ks[1], len(fracs)), fracs,
                                    out["ridge_fp"])
    density = jnp.mean(data.fp)

    def replaced(k, p, everything=False):
        x = _replaced_inputs(k, data.fp, p, density, everything=everything)
        return kernel_ridge(_bit_gram(x), data.y, train, lam)

    # strengths >= 1 and random_features (every bit replaced) in one map, the rest in
    # another; a fraction 0 is the ridge itself
    k_rep = jax.random.split(ks[2], len(fracs))
    part = [i for i, p in enumerate(fracs) if 0 < p < 1]
    full = [i for i, p in enumerate(fracs) if p >= 1]
    rows: dict[int, Array] = {i: out["ridge_fp"] for i, p in enumerate(fracs) if p <= 0}
    if part:
        got = _each(replaced, k_rep[jnp.asarray(part)],
                    jnp.asarray([fracs[i] for i in part], jnp.float32))
        rows.update({i: got[j] for j, i in enumerate(part)})
    got = _each(lambda k: replaced(k, None, everything=True),
                jnp.concatenate([k_rep[jnp.asarray(full, jnp.int32)], ks[3][None]]))
    rows.update({i: got[j] for j, i in enumerate(full)})
    out["replaced_bits"] = jnp.stack([rows[i] for i in range(len(fracs))])
    out["random_features"] = got[-1]
    # unchecked: the masks are checked on the host (features.check_splits) and a
    # run-time check here would be a host callback inside lax.map's loop
    out["nn_tanimoto"] = kfp.nearest_neighbour_predict(data.sim, data.y, train, checked=False)
    v = jax.random.randint(ks[4], (), 0, data.addc_gram.shape[1])
    # the ridge's coefficients queried with each strength's carbon-inserted Gram rows (no solve)
    out["carbon_inserted"] = jnp.stack([_dual_predict(cen, alpha, ybar, data.addc_gram[k, v])
                                   for k in range(data.addc_gram.shape[0])])
    out["noise_ceiling"] = data.y + data.sigma * jax.random.normal(ks[5], (n,))
    return out


def _curve(f, keys, fracs: tuple[float, ...], at_zero):
    """``f(key, p)`` over the static strengths ``fracs`` (one after another,
    :func:`_each`) with ``at_zero`` where ``p <= 0`` (``f`` not called there):
    ``(len(fracs), n)``."""
    live = [i for i, p in enumerate(fracs) if p > 0]
    rows = {i: at_zero for i, p in enumerate(fracs) if p <= 0}
    if live:
        got = _each(f, keys[jnp.asarray(live)], jnp.asarray([fracs[i] for i in live],
                                                               jnp.float32))
        rows.update({i: got[j] for j, i in enumerate(live)})
    return jnp.stack([rows[i] for i in range(len(fracs))])


def run_family(key, data: FamilyData, train: Bool[Array, "S n"],
               settings: FamilySettings = FamilySettings(), seed_batch: int | None = 4
               ) -> dict[str, Array]:
    """:func:`baseline_family` over the seeds of ``train`` (``(S, n)`` masks), with the
    keys ``fold_in(key, s)``: ``{name: (S, n)}`` or ``(S, strengths, n)``.

    The seeds are vmapped ``seed_batch`` at a time (``lax.map`` with ``batch_size``:
    vmapped within a batch, batches in sequence), which bounds the memory of the
    replaced-bit inputs (``seed_batch x strengths x n x d``); ``None`` vmaps all seeds
    at once. Both give the same numbers."""
    S = train.shape[0]
    keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(jnp.arange(S))
    one = lambda k, t: baseline_family(k, data, t, settings)  # noqa: E731
    if seed_batch is None or seed_batch >= S:
        return jax.vmap(one)(keys, train)
    return jax.lax.map(lambda kt: one(*kt), (keys, train), batch_size=int(seed_batch))
