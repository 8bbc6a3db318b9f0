"""Class circuits, their cross-model intersection and the baselines.

For a transcoder over models ``0..M-1`` (:mod:`jaxkit.kernels.crosscoder` ``attribution``
and ``circuits``):

1. **Attribution** of every latent to every class on the *discovery* images (the real,
   unaugmented training images): activation x gradient through the replacement model
   with the error terms held fixed, averaged over the images of the class.
2. **Circuit** of (model m, class c): the smallest attribution-ordered prefix of latents
   whose replacement model (transcoder alone, no error terms) keeps ``keep_frac`` of the
   full replacement's accuracy on the class's discovery images (one vmapped sweep over
   ``n_sizes`` prefix sizes).
3. **Intersection** ``I_c = C_0(c) & C_1(c)``; on the held-out *test* images of class c,
   model m's accuracy with only ``I_c`` active divided by its accuracy with its full
   circuit ``C_m(c)`` is the intersection ratio (the paper's 89-98% claim).
4. **Baselines**: random subsets of ``C_m(c)`` of the size of ``I_c`` (the same
   ratio), and the decoder-matched intersection of two independently trained
   single-model CLTs (:func:`matched_ratios`).
5. **Universal latents** kept by one model's circuit only: universal latents in
   ``C_0(c) xor C_1(c)``, universality calibrated against a shuffled null
   (:mod:`jaxkit.universal_circuits.universality`; the decoder share >= tau in both models
   is kept as ``decoder_universal``: every latent passes it). A second baseline of the
   intersection: the top-``|I_c|`` latents of the circuit by attribution.
6. **Circuit faithfulness** (:func:`faithfulness`), on the test images of class c: a
   circuit's accuracy as a fraction of the full replacement model's, and its normalised
   logit faithfulness ``(mu(C) - mu(0)) / (mu(1) - mu(0))`` (Wang et al. 2023; Marks et
   al. 2024), ``mu`` the mean centred logit of c, ``1`` the full replacement and ``0``
   the empty circuit (:mod:`jaxkit.kernels.crosscoder.faithfulness`).

Accuracies are per class on fixed-size, weight-padded image sets
(:func:`per_class`), so every class shares one compiled computation; recalls and
logits need only the class's own images (:func:`gate_class_stats`), precision needs
every class's images under each class's gates (:func:`gate_scores`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.analysis_jit import analysis_jit
from jaxkit.kernels import crosscoder as cc

from .results import Faithfulness, IntersectionStats
from .transcoder import model_sites, single_masks

__all__ = ["PerClass", "per_class", "Circuits", "find_circuits", "gate_accuracy", "gate_scores",
           "gate_class_stats", "f1", "masks", "single_masks", "intersection_stats",
           "faithfulness", "FAITH_GATES", "matched_ratios", "decoder_images"]


class PerClass(NamedTuple):
    """Images grouped by class: ``x (C, n, P)``, weights ``w (C, n)`` (0 = padding)."""

    x: np.ndarray
    w: np.ndarray


def per_class(x, y, n_classes: int, cap: int | None = None) -> PerClass:
    """The images of each class, padded (weight 0) to the largest class (or ``cap``).

    Raises:
      ValueError: naming ``y`` when a class has no image.
    """
    y = np.asarray(y)
    counts = np.bincount(y, minlength=n_classes)
    if (counts == 0).any():
        raise ValueError(f"`y` has no image of class(es) {np.flatnonzero(counts == 0).tolist()} "
                         "(a class missing from the data)")
    n = int(counts.max() if cap is None else min(cap, counts.max()))
    xs = np.zeros((n_classes, n, x.shape[1]), np.float32)
    ws = np.zeros((n_classes, n), np.float32)
    for c in range(n_classes):
        idx = np.flatnonzero(y == c)[:n]
        xs[c, :len(idx)] = x[idx]
        ws[c, :len(idx)] = 1.0
    return PerClass(xs, ws)


class Circuits(NamedTuple):
    """Circuits of every (model, class): ``gates (M, C, N)`` 0/1, ``sizes (M, C)``,
    ``found (M, C)``, ``full (M, C)`` full-replacement accuracy on the discovery images,
    ``scores (M, C, N)`` mean attributions, ``sweep (M, C, K)`` prefix accuracies and
    ``prefix_sizes (K,)``."""

    gates: np.ndarray
    sizes: np.ndarray
    found: np.ndarray
    full: np.ndarray
    scores: np.ndarray
    sweep: np.ndarray
    prefix_sizes: np.ndarray


def _rest(clfs):
    return tuple(c.rest for c in clfs)


# The fixed shapes every evaluation of a gate compiles for: own-class statistics (recall,
# centred logit) in blocks of GATE_BLOCK gates x IMAGE_BLOCK images of every class;
# precision, which needs every class's images under each class's gates (C times the
# work), in blocks of PRECISION_BLOCK gates (its one caller scores 4 gates per class).
GATE_BLOCK, IMAGE_BLOCK, PRECISION_BLOCK = 16, 64, 4


def _replacement_logits(params, spec, clfs, mparams, read, live, x, g, k):
    # a model seen through recorded sites (usercircuits.SiteClassifier) picks its input
    sites = tuple((c_.first_site(x) if hasattr(c_, "first_site") else x,)
                  + (None,) * c_.n_layers for c_ in clfs)
    _, logits = cc.uc_replacement(params, sites, spec, _rest(clfs), mparams,
                                  gate=g.reshape(spec.n_depths, spec.n_latents) * live,
                                  k=k, read=read, check=False)
    return logits


@functools.lru_cache(maxsize=16)
def _class_fn(spec: cc.UCSpec, clfs: tuple, k: int):
    """``stats(params, mparams, read, live, xs (C, n, P), ws (C, n), gates (C, K, N)) ->
    (C, K, M, 2)``: under class ``c``'s gates, on class ``c``'s images only, the weighted
    count of images predicted ``c`` (true positives) and the weighted sum of the centred
    logit of ``c`` (:func:`jaxkit.kernels.crosscoder.centred`)."""

    def one_class(params, mparams, read, live, x, w, c, gates):
        def stats(g):
            logits = _replacement_logits(params, spec, clfs, mparams, read, live, x, g, k)
            return jnp.stack([jnp.stack([jnp.sum(w * (jnp.argmax(lg, -1) == c)),
                                         jnp.sum(w * cc.centred(lg)[:, c])]) for lg in logits])

        return jax.vmap(stats)(gates)

    def fn(params, mparams, read, live, xs, ws, gates):
        cs = jnp.arange(xs.shape[0])
        return jax.vmap(one_class, in_axes=(None, None, None, None, 0, 0, 0, 0))(
            params, mparams, read, live, xs, ws, cs, gates)

    return jax.jit(fn)  # full optimisation: it runs ~50 times per quick run


@functools.lru_cache(maxsize=16)
def _precision_fn(spec: cc.UCSpec, clfs: tuple, k: int):
    """``counts(params, mparams, read, live, xs (C, n, P), ws (C, n), gates (C, K, N)) ->
    (C, K, M, 2)``: under class ``c``'s gates, on the images of every class, the weighted
    count of class-``c`` images predicted ``c`` (true positives) and of all images
    predicted ``c``."""

    def one_class(params, mparams, read, live, xs, ws, c, gates):
        C, n = ws.shape
        x, w = xs.reshape(C * n, -1), ws.reshape(-1)
        is_c = (jnp.arange(C * n) // n) == c

        def counts(g):
            logits = _replacement_logits(params, spec, clfs, mparams, read, live, x, g, k)
            pc = [(jnp.argmax(lg, -1) == c) for lg in logits]
            return jnp.stack([jnp.stack([jnp.sum(w * p * is_c), jnp.sum(w * p)]) for p in pc])

        return jax.vmap(counts)(gates)

    def fn(params, mparams, read, live, xs, ws, gates):
        cs = jnp.arange(xs.shape[0])
        return jax.vmap(one_class, in_axes=(None, None, None, None, None, None, 0, 0))(
            params, mparams, read, live, xs, ws, cs, gates)

    return analysis_jit(fn)


def _pad_axis1(a: np.ndarray, block: int) -> np.ndarray:
    n = -(-a.shape[1] // block) * block
    return np.pad(a, [(0, 0), (0, n - a.shape[1])] + [(0, 0)] * (a.ndim - 2))


def masks(spec, read=None, live=None) -> tuple[jax.Array, jax.Array]:
    """``(read (M,), live (D, F))`` as arrays (all ones by default: the cross-model
    transcoder; a single-model CLT of model m in the same shapes has ``read = e_m`` and
    ``live`` off on the depths m has no layer at, :func:`single_masks`)."""
    r = jnp.ones((spec.n_models,), jnp.float32) if read is None else jnp.asarray(read,
                                                                                 jnp.float32)
    lv = (jnp.ones((spec.n_depths, spec.n_latents), jnp.float32) if live is None
          else jnp.asarray(live, jnp.float32))
    return r, lv


def _blocked(fn, params, mparams, read, live, pc: PerClass, gates, gate_block: int
             ) -> np.ndarray:
    """``fn``'s sums over the images of ``pc`` for the gates ``(C, K, N)``, in zero-padded
    blocks of ``IMAGE_BLOCK`` images x ``gate_block`` gates: ``(C, K, M, 2)``."""
    gates = np.asarray(gates, np.float32)
    K = gates.shape[1]
    xs, ws = _pad_axis1(np.asarray(pc.x), IMAGE_BLOCK), _pad_axis1(np.asarray(pc.w), IMAGE_BLOCK)
    gs = _pad_axis1(gates, gate_block)
    mp = tuple(mparams)
    cnt = 0.0
    for i in range(0, xs.shape[1], IMAGE_BLOCK):
        xb, wb = jnp.asarray(xs[:, i:i + IMAGE_BLOCK]), jnp.asarray(ws[:, i:i + IMAGE_BLOCK])
        cnt = cnt + np.concatenate([np.asarray(fn(params, mp, read, live, xb, wb,
                                                  jnp.asarray(gs[:, j:j + gate_block])))
                                    for j in range(0, gs.shape[1], gate_block)], axis=1)
    return cnt[:, :K].astype(np.float64)


def _n_images(pc: PerClass) -> np.ndarray:
    return np.maximum(np.asarray(pc.w, np.float64).sum(1), 1e-9)[:, None, None]


def gate_scores(params, spec, clfs, mparams, pc: PerClass, gates, k: int, read=None,
                live=None) -> tuple[np.ndarray, np.ndarray]:
    """Recall and precision ``(C, K, M)`` of each model's replacement (transcoder alone,
    no error terms) for class ``c`` under class ``c``'s gates ``(C, K, N)``: recall on
    the class's images, precision over the images of all classes (a gate that sends
    every image to ``c`` has recall 1 and precision about 1/C). Images and gates go
    through in blocks of ``IMAGE_BLOCK`` x ``PRECISION_BLOCK`` (zero-padded), so every
    call of one transcoder shape shares one compiled program."""
    r, lv = masks(spec, read, live)
    cnt = _blocked(_precision_fn(spec, tuple(clfs), int(k)), params, mparams, r, lv, pc, gates,
                   PRECISION_BLOCK)
    recall = cnt[..., 0] / _n_images(pc)
    precision = cnt[..., 0] / np.maximum(cnt[..., 1], 1e-9)
    return recall, precision


def gate_class_stats(params, spec, clfs, mparams, pc: PerClass, gates, k: int, read=None,
                     live=None) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy (recall) and mean centred logit ``(C, K, M)`` of class ``c`` on its own
    images under class ``c``'s gates ``(C, K, N)`` (each model's replacement, transcoder
    alone). Only the class's own images go through (in blocks of ``IMAGE_BLOCK`` x
    ``GATE_BLOCK``, one compiled program per transcoder shape), a ``C``-th of the work of
    :func:`gate_scores`; the recall is the same."""
    r, lv = masks(spec, read, live)
    s = _blocked(_class_fn(spec, tuple(clfs), int(k)), params, mparams, r, lv, pc, gates,
                 GATE_BLOCK)
    return s[..., 0] / _n_images(pc), s[..., 1] / _n_images(pc)


def gate_accuracy(params, spec, clfs, mparams, pc: PerClass, gates, k: int, read=None,
                  live=None) -> np.ndarray:
    """Accuracy (recall) ``(C, K, M)`` of :func:`gate_class_stats` (the recall of
    :func:`gate_scores`)."""
    return gate_class_stats(params, spec, clfs, mparams, pc, gates, k, read, live)[0]


def f1(recall, precision):
    """``2 p r / (p + r)`` (0 where both are 0)."""
    r, p = np.asarray(recall), np.asarray(precision)
    return np.where(r + p > 0, 2 * p * r / np.maximum(r + p, 1e-12), 0.0)


@functools.lru_cache(maxsize=16)
def _attr_fn(spec: cc.UCSpec, clfs: tuple, k: int):
    def fn(params, mparams, read, live, sites, labels):
        A = cc.uc_attribution(params, sites, spec, _rest(clfs), mparams, k=k, read=read,
                              live=live)
        return cc.class_attribution(A, labels)

    return analysis_jit(fn)


def class_scores(params, spec, clfs, mparams, x, y, k: int, chunk: int = 512, read=None,
                 live=None) -> np.ndarray:
    """Mean attribution ``(M, C, N)`` of every latent to each class over its images."""
    r, lv = masks(spec, read, live)
    C = int(np.max(y)) + 1
    total, counts = 0.0, np.zeros(C)
    fn = _attr_fn(spec, tuple(clfs), int(k))
    for i in range(0, len(x), chunk):
        xb, yb = x[i:i + chunk], np.asarray(y[i:i + chunk])
        sites = model_sites(clfs, mparams, xb)
        n = np.bincount(yb, minlength=C).astype(np.float64)
        # class_attribution needs every class present: pad the chunk with one image each
        miss = np.flatnonzero(n == 0)
        if miss.size:
            pad_idx = np.array([np.flatnonzero(np.asarray(y) == c)[0] for c in miss])
            xb = np.concatenate([xb, x[pad_idx]])
            yb = np.concatenate([yb, miss])
            sites = model_sites(clfs, mparams, xb)
        s = np.asarray(fn(params, tuple(mparams), r, lv, sites, jnp.asarray(yb)), np.float64)
        nb = np.bincount(yb, minlength=C).astype(np.float64)
        if miss.size:  # remove the padding images' contribution by weighting it out
            nb_used = nb.copy()
            nb_used[miss] = 0.0
            s = s * (nb_used / np.maximum(nb, 1))[None, :, None, None]
            nb = nb_used
        total = total + s * nb[None, :, None, None]
        counts += nb
    M = len(clfs)
    return (total / counts[None, :, None, None]).reshape(M, C, -1)


@analysis_jit
def _prefix_gates(scores, sizes):
    """``(C, K, N)`` prefix gates of every class's scores ``(C, N)``."""
    return jax.vmap(lambda s: cc.prefix_gates(s, sizes))(scores)


@analysis_jit(static_argnums=4)
def _select(sizes, gates, accs, full, keep_frac: float):
    return jax.vmap(lambda g, a, f: cc.select_circuit(sizes, g, a, keep_frac, f))(gates, accs,
                                                                                   full)


@analysis_jit
def _random_gates(key, circuit_gates, shared):
    """``(C, R, N)``: per class, ``R`` (the keys) random subsets of the circuit of size
    ``shared[c]``."""
    def one(kk):
        u = jax.random.uniform(kk, circuit_gates.shape)
        sc = jnp.where(circuit_gates > 0, u, -1.0)
        return jax.vmap(lambda sc_c, n: cc.prefix_gates(sc_c, n[None])[0])(sc, shared)

    return jnp.swapaxes(jax.vmap(one)(key), 0, 1)


def prefix_sizes(n: int, k: int) -> np.ndarray:
    """``k`` increasing prefix sizes from 1 to ``n``, denser at small sizes."""
    s = np.unique(np.round(np.geomspace(1, n, k)).astype(np.int32))
    return s


def find_circuits(params, spec, clfs, mparams, disc_x, disc_y, *, k: int, keep_frac: float,
                  n_sizes: int, cap: int | None = None, read=None, live=None) -> Circuits:
    """Attribution, then the pruned circuit of every (model, class) (module docstring).
    ``read`` / ``live``: :func:`masks` (latents that are not live rank last and are
    never part of a circuit)."""
    M, N = len(clfs), spec.n_depths * spec.n_latents
    C = int(np.max(disc_y)) + 1
    lv = np.asarray(masks(spec, read, live)[1]).reshape(-1)
    scores = class_scores(params, spec, clfs, mparams, disc_x, disc_y, k, read=read, live=live)
    pc = per_class(disc_x, disc_y, C, cap)
    full = gate_accuracy(params, spec, clfs, mparams, pc, np.ones((C, 1, N)), k, read,
                         live)[:, 0, :].T
    sizes = jnp.asarray(prefix_sizes(N, n_sizes))
    gates, out_sizes, found, sweeps = [], [], [], []
    for m in range(M):
        sc = jnp.asarray(np.where(lv[None] > 0, scores[m], -1e30), jnp.float32)
        pg = _prefix_gates(sc, sizes)  # (C, K, N)
        accs = gate_accuracy(params, spec, clfs, mparams, pc, pg, k, read, live)[..., m]
        res = _select(sizes, pg, jnp.asarray(accs, jnp.float32),
                      jnp.asarray(full[m], jnp.float32), float(keep_frac))
        g = np.asarray(res.gate) * lv[None]
        gates.append(g)
        out_sizes.append(g.sum(-1).astype(np.int32))
        found.append(np.asarray(res.found))
        sweeps.append(accs)
    return Circuits(np.stack(gates), np.asarray(out_sizes), np.asarray(found), full, scores,
                    np.stack(sweeps), np.asarray(sizes))


_universal = analysis_jit(cc.universal_latents, static_argnums=(1, 2))


def intersection_stats(key, params, spec, clfs, mparams, circ: Circuits, test_x, test_y, *,
                       k: int, n_random: int, tau: float, universal=None
                       ) -> IntersectionStats:
    """Intersections, their ratios, the baselines and the universal latents.

    Baselines of the intersection ``I_c`` in model ``m``, each of ``|I_c|`` latents of the
    circuit ``C_m(c)``: ``n_random`` random subsets, and the top-``|I_c|`` latents of the
    circuit by model ``m``'s attribution to ``c`` (the circuit's own prefix of that size:
    what the attribution alone picks when told the intersection's size).

    Args:
      key: the random subsets' key.
      params, spec, clfs, mparams: the transcoder and the 2 models.
      circ: :func:`find_circuits`.
      test_x, test_y: held-out images.
      k: TopK.
      n_random: random subsets per (model, class).
      tau: decoder-norm share of the uncalibrated universality (``decoder_universal``).
      universal: ``(N,)`` bool, the calibrated universal latents
        (:func:`jaxkit.universal_circuits.universality.calibrated_universal`) the
        one-model-only count uses; None: the decoder-share ones.

    Returns:
      An :class:`.results.IntersectionStats`: ``shared`` (C,), ``ratio`` (M, C),
      ``acc_intersection``, ``acc_circuit``, ``acc_full`` (M, C), ``random_ratio`` (M, C),
      ``top_ratio`` (M, C) of the top-``|I|`` attribution subset, ``one_only`` (M, C)
      universal latents in ``C_m(c)`` but not the other circuit, ``xor`` (M, C) all
      latents so, ``universal`` (N,) bool (the ones used), ``decoder_universal`` (N,)
      bool, ``empty`` (C,) bool, ``precision`` (M, C) of the intersection over all test
      images, ``f1`` (M, C) the intersection's F1 over the circuit's; an empty
      intersection has ratio 0 (and so have its baselines).
    """
    M, C, N = circ.gates.shape
    if M != 2:
        raise ValueError(f"intersections need a transcoder over 2 models; got {M}")
    pc = per_class(test_x, test_y, C)
    inter = circ.gates[0] * circ.gates[1]  # (C, N)
    shared = inter.sum(1).astype(int)
    empty = shared == 0
    size = jnp.asarray(np.maximum(shared, 1), jnp.int32)
    tops = [np.asarray(_top_gates(jnp.asarray(circ.scores[m], jnp.float32),
                                  jnp.asarray(circ.gates[m], jnp.float32), size))
            for m in range(M)]
    gates = np.stack([inter, circ.gates[0], circ.gates[1], np.ones_like(inter), *tops], axis=1)
    acc, prec = gate_scores(params, spec, clfs, mparams, pc, gates, k)  # (C, 4 + M, M)
    acc_i = acc[:, 0, :].T
    acc_c = np.stack([acc[:, 1, 0], acc[:, 2, 1]])
    acc_f = acc[:, 3, :].T
    ratio = np.where(empty[None], 0.0, acc_i / np.maximum(acc_c, 1e-9))
    top = np.stack([np.where(empty, 0.0, acc[:, 4 + m, m] / np.maximum(acc_c[m], 1e-9))
                    for m in range(M)])
    prec_i = prec[:, 0, :].T
    f1_i = f1(acc_i, prec_i)
    f1_c = f1(acc_c, np.stack([prec[:, 1, 0], prec[:, 2, 1]]))
    f1_ratio = np.where(empty[None], 0.0, f1_i / np.maximum(f1_c, 1e-9))
    # random subsets of each model's circuit of the intersection's size
    rand = np.zeros((M, C))
    for m in range(M):
        keys = jax.random.split(jax.random.fold_in(key, m), n_random)
        g = _random_gates(keys, jnp.asarray(circ.gates[m], jnp.float32), size)  # (C, R, N)
        a = gate_accuracy(params, spec, clfs, mparams, pc, g, k)[..., m]
        rand[m] = np.where(empty, 0.0, a.mean(1) / np.maximum(acc_c[m], 1e-9))
    dec = np.asarray(_universal(params, spec, float(tau))).reshape(-1)
    univ = dec if universal is None else np.asarray(universal, bool).reshape(-1)
    only = [(circ.gates[m] > 0) & (circ.gates[1 - m] == 0) for m in range(M)]
    one_only = np.stack([(o & univ[None]).sum(1) for o in only])
    return IntersectionStats(shared=shared, ratio=ratio, acc_intersection=acc_i,
                             acc_circuit=acc_c, acc_full=acc_f, random_ratio=rand,
                             top_ratio=top, one_only=one_only,
                             xor=np.stack([o.sum(1) for o in only]), universal=univ,
                             decoder_universal=dec, empty=empty, precision=prec_i,
                             f1=f1_ratio)


@analysis_jit
def _top_gates(scores, circuit_gates, shared):
    """``(C, N)``: per class, the top-``shared[c]`` latents of the circuit by score."""
    sc = jnp.where(circuit_gates > 0, scores, -1e30)
    return jax.vmap(lambda s, n: cc.prefix_gates(s, n[None])[0])(sc, shared)


FAITH_GATES = ("full", "circuit 0", "circuit 1", "intersection", "empty")


def faithfulness(params, spec, clfs, mparams, gates, test_x, test_y, *, k: int
                 ) -> Faithfulness:
    """Circuit faithfulness on held-out images (module docstring, 6.).

    For class ``c`` and model ``m`` the metric ``mu(g)`` is, under gate ``g`` of the
    replacement model (transcoder alone), either the accuracy (recall) on the test
    images of class ``c`` or the mean centred logit of ``c`` on them; the gates are the
    full replacement (every latent on), each model's circuit of ``c``, their
    intersection and the empty circuit (every latent off: the decoder biases alone).

    Args:
      params, spec, clfs, mparams: the transcoder and the models.
      gates: ``(M, C, N)`` the circuits (:attr:`Circuits.gates`).
      test_x, test_y: held-out images.
      k: TopK.

    Returns:
      A :class:`.results.Faithfulness`: ``acc``, ``logit`` ``(M, C, 5)``: the metrics of
      model ``m`` under the gates of :data:`FAITH_GATES`; ``circuit_acc``, ``inter_acc``
      ``(M, C)``: the accuracy of model ``m``'s own circuit / of the intersection as a
      fraction of the full replacement's, ``mu(C) / mu(1)`` (0 where ``mu(1)`` is 0);
      ``circuit_logit``, ``inter_logit`` ``(M, C)``: the normalised logit faithfulness
      ``(mu(C) - mu(0)) / (mu(1) - mu(0))``
      (:func:`jaxkit.kernels.crosscoder.circuit_faithfulness`; 0 where
      ``mu(1) = mu(0)``, ``logit_valid`` False there).
    """
    gates = np.asarray(gates, np.float32)
    M, C, N = gates.shape
    if M != 2:
        raise ValueError(f"`gates` must hold the circuits of 2 models; got {M}")
    pc = per_class(test_x, test_y, C)
    inter = gates[0] * gates[1]
    g = np.stack([np.ones_like(inter), gates[0], gates[1], inter, np.zeros_like(inter)],
                 axis=1)  # (C, 5, N)
    acc, logit = (np.moveaxis(a, -1, 0) for a in  # (M, C, 5)
                  gate_class_stats(params, spec, clfs, mparams, pc, g, k))
    own = np.stack([acc[m, :, 1 + m] for m in range(M)]), np.stack([logit[m, :, 1 + m]
                                                                    for m in range(M)])
    full, empty = (acc[..., 0], logit[..., 0]), (acc[..., 4], logit[..., 4])
    c_logit, valid = (np.asarray(v) for v in cc.circuit_faithfulness(own[1], full[1],
                                                                       empty[1]))
    i_logit, _ = cc.circuit_faithfulness(logit[..., 3], full[1], empty[1])
    return Faithfulness(acc=acc, logit=logit,
                        circuit_acc=own[0] / np.maximum(full[0], 1e-9),
                        inter_acc=acc[..., 3] / np.maximum(full[0], 1e-9),
                        circuit_logit=c_logit, inter_logit=np.asarray(i_logit),
                        logit_valid=valid)


_logit_effects = analysis_jit(cc.logit_effects, static_argnums=(1, 2))
_match = analysis_jit(cc.match_by_decoder)


def matched_ratios(spec, clfs, mparams, singles: Sequence[tuple], circs: Sequence[Circuits],
                   test_x, test_y, *, k: int, threshold: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The decoder-matched intersection of two single-model CLTs.

    Args:
      spec, clfs, mparams: the two models and the cross-model shapes the single-model
        CLTs are trained in.
      singles: per model ``m``, ``(params, read, live)`` of its own CLT
        (:func:`single_masks`).
      circs: their circuits (:func:`find_circuits` with those masks; row ``m`` of
        ``circs[m]`` is model ``m``'s).
      test_x, test_y: held-out images.
      k: TopK.
      threshold: logit-effect cosine for a match.

    Returns:
      ``ratio (2, C)``, each model's accuracy with its matched latents over its accuracy
      with its circuit (0 where nothing matched), and ``shared (2, C)``, its matched
      latents.
    """
    C = circs[0].gates.shape[1]
    pc = per_class(test_x, test_y, C)
    effs = []
    for m, (p, _, _) in enumerate(singles):
        W, _ = clfs[m].head(mparams[m])
        effs.append(np.asarray(_logit_effects(p, spec, m, W)).reshape(-1, W.shape[1]))
    ratio, shared = np.zeros((2, C)), np.zeros((2, C), int)
    sa_all, sb_all = [], []
    for c in range(C):
        sa, sb = _match(jnp.asarray(effs[0]), jnp.asarray(effs[1]),
                        jnp.asarray(circs[0].gates[0, c]), jnp.asarray(circs[1].gates[1, c]),
                        threshold)
        sa_all.append(np.asarray(sa))
        sb_all.append(np.asarray(sb))
    for m, (sh, (p, read, live)) in enumerate(zip((sa_all, sb_all), singles, strict=True)):
        sh = np.stack(sh)
        g = np.stack([sh, circs[m].gates[m]], axis=1)  # (C, 2, N)
        acc = gate_accuracy(p, spec, clfs, mparams, pc, g, k, read, live)[..., m]
        shared[m] = sh.sum(1)
        ratio[m] = np.where(shared[m] == 0, 0.0, acc[:, 0] / np.maximum(acc[:, 1], 1e-9))
    return ratio, shared


@functools.lru_cache(maxsize=16)
def _decoder_image_fn(clf):
    def fn(mp, x, V):
        """``(L, n, P)``: for each layer ``j``, the mean over images of the input gradient of
        ``V[j, i] . h_{j+1}(x)`` (each row of ``V[j]`` a decoder into layer ``j``'s
        output)."""
        out = []
        for j in range(clf.n_layers):
            def f(xx, v, j=j):
                return jnp.sum(clf.sites(mp, xx)[j + 1] @ v)

            out.append(jax.vmap(lambda v, f=f: jax.grad(f)(x, v) / x.shape[0])(V[j])
                       .sum(1))
        return jnp.stack(out)

    return analysis_jit(fn)


def decoder_images(params, spec, clfs, mparams, x, latents: Sequence[int]) -> np.ndarray:
    """Each latent's decoder mapped back to each model's input space: ``(M, n, P)``.

    For latent ``(s, f)`` (flat index ``s F + f``) and model ``m``, with ``j`` the
    model's first layer at depth ``>= s`` (the first it writes to) and ``d`` its decoder
    row into that layer's output, the image is ``mean_b d/dx_b [d . h_{j+1}(x_b)]``: the
    input direction that moves the written site along the decoder, averaged over the
    images ``x`` (the real discovery images). For an MLP's first layer this is
    ``W_0 (1{pre > 0} * d)``, the decoder seen through the layer's weights.
    """
    lat = np.asarray(latents, int)
    s_idx, f_idx = lat // spec.n_latents, lat % spec.n_latents
    out = []
    for m, (clf, mp) in enumerate(zip(clfs, mparams, strict=True)):
        dm = np.asarray(spec.depth_map[m])
        V = tuple(jnp.asarray(np.asarray(params.W_dec[m][j])[s_idx, f_idx])
                  for j in range(len(dm)))
        imgs = np.asarray(_decoder_image_fn(clf)(mp, jnp.asarray(x, jnp.float32), V))
        first = np.array([int(np.argmax(dm >= s)) for s in s_idx])
        writes = np.array([bool(np.any(dm >= s)) for s in s_idx])  # else: no decoder into m
        out.append(imgs[first, np.arange(len(lat))] * writes[:, None])
    return np.stack(out)
