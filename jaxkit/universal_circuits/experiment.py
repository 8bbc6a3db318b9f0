"""The stages of ``jaxkit run universal-circuits``, each a function of the config, keys
and earlier stages' results, returning the typed results of :mod:`.results` (frozen
dataclasses of NumPy arrays, picklable: ``ctx.stage`` caches them): the models, a pair's
transcoder with its circuits and intersections, the single-model CLT baseline and the
surgery.
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.analysis_jit import analysis_jit
from jaxkit.crosscoder.store import SiteStore
from jaxkit.kernels import crosscoder as cc
from jaxkit.stats import as_generator

from . import circuits as C
from . import surgery as S
from . import universality as U
from .config import Config
from .data import N_CLASSES, Digits, augmented_stream
from .models import Arch, Classifier, accuracy, train_classifier
from .results import (
    Faithfulness,
    ModelRun,
    PairAnalysis,
    SingleBaseline,
    SurgeryResult,
    TranscoderEval,
    TranscoderRun,
    Universality,
    stack,
)
from .transcoder import model_sites, record, single_masks, train_uc

__all__ = ["aug_kwargs", "archs", "model_names", "stream", "train_model", "train_pair",
           "pair_analysis", "single_baseline", "surgery", "receiver", "held_out", "uc_eval",
           "universality", "circuit_faithfulness", "seed_params", "stream_size"]


def aug_kwargs(cfg: Config) -> dict:
    return dict(max_shift=cfg.max_shift, max_rotation=cfg.max_rotation,
                alpha=cfg.elastic_alpha, sigma=cfg.elastic_sigma)


def archs(cfg: Config) -> dict[str, Arch]:
    """Architecture of every model name (``mlp2``, ``vit2``, ``cnn2``: second seeds;
    ``cnn-minus<c>``: the CNN trained without class ``c``, one per surgery class)."""
    mlp = Arch("mlp", cfg.image_size, widths=tuple(cfg.mlp_widths))
    cnn = Arch("cnn", cfg.image_size, channels=tuple(cfg.cnn_channels), hidden=cfg.cnn_hidden,
               strides=tuple(cfg.cnn_strides))
    vit = Arch("vit", cfg.image_size, hidden=cfg.vit.hidden, patch=cfg.vit.patch,
               dim=cfg.vit.dim, depth=cfg.vit.depth, heads=cfg.vit.heads, mlp=cfg.vit.mlp)
    return {"mlp": mlp, "cnn": cnn, "mlp2": mlp, "vit": vit, "vit2": vit, "cnn2": cnn,
            **{receiver(c): cnn for c in cfg.surgery_classes}}


def model_names(cfg: Config) -> tuple[list[str], dict[str, list[str]]]:
    """The models a run trains and its pairs (tag -> the two names), the main pair
    (``<family>-cnn``: the misaligned control, the single-model CLTs and the surgery
    giver use it) first."""
    f = cfg.family
    pairs = {f"{f}-cnn": [f, "cnn"]}
    if cfg.second_seed:
        pairs[f"{f}2-cnn2"] = [f"{f}2", "cnn2"]
    if cfg.same_arch_pair:
        pairs[f"{f}-{f}2"] = [f, f"{f}2"]
    names = [f, "cnn"] + [receiver(c) for c in cfg.surgery_classes]
    names += [n for pn in pairs.values() for n in pn if n not in names]
    return list(dict.fromkeys(names)), pairs


def receiver(cls: int) -> str:
    """The name of the CNN trained without class ``cls``."""
    return f"cnn-minus{cls}"


def held_out(name: str) -> int | None:
    """The class model ``name`` was trained without (None: every class)."""
    return int(name[len("cnn-minus"):]) if name.startswith("cnn-minus") else None


_CLF: dict[Arch, Classifier] = {}


def classifier(arch: Arch) -> Classifier:
    """One :class:`Classifier` per architecture (so compiled functions are shared)."""
    if arch not in _CLF:
        _CLF[arch] = Classifier(arch)
    return _CLF[arch]


_STREAMS: dict = {}


def stream_size(cfg: Config) -> int:
    """Augmented images per run: enough for the models' batches and the recording."""
    return max(8 * cfg.model_steps, cfg.n_record)


def stream(key, cfg: Config, digits: Digits, exclude: int | None = None):
    """The run's one augmented stream (:func:`stream_size` images) followed by the real
    pool itself, made once per run and shared by every model and recording. With
    ``exclude``, that class's images are replaced by other images of the stream (a
    fixed resampling), so the stream keeps its shape (one compiled training for the
    model with and without the class) and the class is never a target."""
    n = stream_size(cfg)
    tag = (cfg.digest(), n, tuple(np.asarray(jax.random.key_data(key)).ravel().tolist()))
    if tag not in _STREAMS:
        x, y = augmented_stream(key, digits.x_train, digits.y_train, n, cfg.image_size,
                                **aug_kwargs(cfg))
        _STREAMS.clear()
        _STREAMS[tag] = (np.concatenate([x, digits.x_train]),
                         np.concatenate([y, digits.y_train]))
    x, y = _STREAMS[tag]
    if exclude is None:
        return x, y
    idx = without_class(key, y, exclude)
    return x[idx], y[idx]


def without_class(key, y: np.ndarray, exclude: int) -> np.ndarray:
    """Row indices of a stream with class ``exclude`` replaced: each of its rows by a row
    of another class, drawn uniformly from the stream's key's named stream
    ``"without-class"`` (no fixed seed: another run key, another draw).

    Args:
        key: the stream's key.
        y: the stream's labels.
        exclude: the class to replace.

    Returns:
        ``(len(y),)`` int indices, the identity outside the class's rows.
    """
    keep, drop = np.flatnonzero(y != exclude), np.flatnonzero(y == exclude)
    idx = np.arange(len(y))
    rng = as_generator(jax.random.fold_in(key, zlib.crc32(b"without-class")))
    idx[drop] = rng.choice(keep, len(drop))
    return idx


def train_model(key, stream_key, cfg: Config, name: str, digits: Digits, out: Path, *,
                resume: bool, mesh) -> dict:
    """Train model ``name`` (initialisation and batches from ``key``) on the augmented
    stream of ``stream_key``; returns its parameters (NumPy leaves), history and
    per-image test correctness."""
    arch = archs(cfg)[name]
    clf = classifier(arch)
    exclude = held_out(name)
    x, y = stream(stream_key, cfg, digits, exclude)
    p, hist = train_classifier(jax.random.fold_in(key, 2), clf, x, y, steps=cfg.model_steps,
                               batch=cfg.model_batch, lr=cfg.model_lr, chunk=cfg.log_every,
                               checkpoint_dir=out / "checkpoints" / f"model-{name}",
                               checkpoint_every=cfg.checkpoint_every, resume=resume, mesh=mesh)
    return ModelRun(leaves=Classifier.to_numpy(p), history=hist,
                    correct=accuracy(clf, p, digits.x_test, digits.y_test))


def load(cfg: Config, names, models: dict[str, ModelRun]
         ) -> tuple[list[Classifier], list[Any]]:
    clfs = [classifier(archs(cfg)[n]) for n in names]
    return clfs, [c.from_numpy(models[n].leaves) for c, n in zip(clfs, names, strict=True)]


def train_pair(key, stream_key, cfg: Config, names, models: dict, digits: Digits, out: Path,
               tag: str, *, resume: bool, mesh, n_seeds: int | None = None,
               single: int | None = None, misaligned: bool = False) -> TranscoderRun:
    """Record the models' activations on the first ``n_record`` images of the run's
    augmented stream (``stream_key``) and train a transcoder over them (``single``: a
    single-model CLT of that model in the same shapes; ``n_seeds``: that many
    independent transcoders, stacked; ``misaligned``: the second model's rows are
    another image's, a fixed permutation drawn from ``key``'s named stream
    ``"misalign"``: the negative control of universality)."""
    clfs, ps = load(cfg, names, models)
    train_key = key
    x, y = stream(stream_key, cfg, digits)
    x, y = x[:cfg.n_record], y[:cfg.n_record]
    perm = (as_generator(jax.random.fold_in(key, zlib.crc32(b"misalign"))).permutation(len(x))
            if misaligned else None)
    folder = record(out / "stores" / tag, names, clfs, ps, x, y, misalign=perm)
    store = SiteStore(folder, batch_size=cfg.uc.batch, seed=0, models=names,
                      n_classes=N_CLASSES)
    spec, params, hist = train_uc(train_key, store, clfs, ps, n_latents=cfg.uc.latents,
                                  k=cfg.uc.k, steps=cfg.uc.steps, lr=cfg.uc.lr,
                                  fidelity_coef=cfg.fidelity_coef, chunk=cfg.log_every,
                                  checkpoint_dir=out / "checkpoints" / f"uc-{tag}",
                                  checkpoint_every=cfg.checkpoint_every, resume=resume,
                                  mesh=mesh, n_seeds=n_seeds, single=single)
    return TranscoderRun(spec=spec, params=jax.tree.map(np.asarray, params), history=hist,
                         single=single)


def discovery(cfg: Config, digits: Digits) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``cfg.discovery_per_class`` real training images of each class (the images
    circuits are found on; the test split stays for evaluating them)."""
    idx = np.concatenate([np.flatnonzero(digits.y_train == c)[:cfg.discovery_per_class]
                          for c in range(N_CLASSES)])
    return digits.x_train[idx], digits.y_train[idx]


def seed_params(params, s: int):
    """Transcoder ``s`` of a stack trained with ``n_seeds``."""
    return jax.tree.map(lambda a: a[s], params)


@functools.lru_cache(maxsize=16)
def _eval_fn(spec: cc.UCSpec, clfs: tuple, k: int):
    """One compiled evaluation of a transcoder per shape (:func:`uc_eval`)."""
    rest = tuple(c.rest for c in clfs)

    def ev(params, sites, ps):
        _, out = cc.uc_loss(params, sites, spec, rest_fns=rest, model_params=ps, k=k,
                            fidelity_coef=1.0)
        repl = cc.uc_replacement(params, sites, spec, rest, ps, k=k)[1]
        fid = []
        for m, c in enumerate(clfs):
            h = sites[m][c.n_layers]
            model = c.rest(ps[m], c.n_layers, h)
            base = c.rest(ps[m], c.n_layers, jnp.mean(h, 0, keepdims=True))[0]
            fid.append(cc.output_fidelity(model, repl[m], base))
        return out, repl, jax.tree.map(lambda *a: jnp.stack(a), *fid)

    return analysis_jit(ev)


def uc_eval(cfg: Config, names, models: dict, uc: TranscoderRun, digits: Digits
            ) -> TranscoderEval:
    """Per-site FVU, fidelity KL, replacement accuracy and the replacement model's output
    fidelity on the test images, for every seed of the stack.

    The replacement model replaces every layer of both models by the transcoder (no
    error terms; :func:`jaxkit.kernels.crosscoder.uc_replacement`). Its output fidelity
    (:func:`jaxkit.kernels.crosscoder.output_fidelity`) is measured per model as in the
    circuit-tracing evaluation of cross-layer transcoders (Ameisen et al. 2025): the
    fraction of test images on which its top-1 prediction is the model's, and the KL
    fidelity ``1 - KL(model || replacement) / KL(model || mean ablation)``, the mean
    ablation being the model with its last site replaced by its mean over the test images
    (constant logits ``head(mean h_L)``).

    Returns:
      A :class:`.results.TranscoderEval`.
    """
    clfs, ps = load(cfg, names, models)
    spec = uc.spec
    sites = model_sites(clfs, ps, digits.x_test)
    ev = _eval_fn(spec, tuple(clfs), int(cfg.uc.k))
    res = []
    for s in range(uc.n_seeds):
        out, logits, fid = ev(seed_params(uc.params, s), sites, tuple(ps))
        res.append((np.asarray(out.fvu), float(out.kl), float(out.l0),
                    [float(np.mean(np.argmax(np.asarray(lg), -1) == digits.y_test))
                     for lg in logits], jax.tree.map(np.asarray, fid)))
    fvu, kl, l0, acc = (np.asarray(v) for v in zip(*[r[:4] for r in res], strict=True))
    fid = [r[4] for r in res]
    return TranscoderEval(fvu=fvu, kl=kl, l0=l0, replacement_acc=acc, layers=spec.layers(),
                          agreement=np.stack([f.agreement for f in fid]),
                          kl_replacement=np.stack([f.kl for f in fid]),
                          kl_fidelity=np.stack([f.kl_fidelity for f in fid]),
                          baseline_agreement=fid[0].baseline_agreement,
                          baseline_kl=fid[0].baseline_kl)


def circuit_faithfulness(cfg: Config, names, models: dict, uc: TranscoderRun,
                         pa: PairAnalysis, digits: Digits) -> Faithfulness:
    """The faithfulness of the class circuits of :func:`pair_analysis` (``pa``) on the test
    images, for every seed (:func:`jaxkit.universal_circuits.circuits.faithfulness`,
    results stacked on a leading seed axis): a cheap stage on the saved circuits."""
    clfs, ps = load(cfg, names, models)
    return stack([C.faithfulness(seed_params(uc.params, s), uc.spec, clfs, ps,
                                 pa.circuits.gates[s], digits.x_test, digits.y_test,
                                 k=cfg.uc.k) for s in range(uc.n_seeds)])


def pair_analysis(key, cfg: Config, names, models: dict, uc: TranscoderRun, digits: Digits
                  ) -> PairAnalysis:
    """Circuits of every class in both models, intersections and baselines, for every
    seed of the transcoder stack (results stacked on a leading seed axis), and the
    decoder images of the first seed's most shared latents."""
    clfs, ps = load(cfg, names, models)
    spec = uc.spec
    dx, dy = discovery(cfg, digits)
    univ = universality(jax.random.fold_in(key, 10_000), cfg, names, models, uc, digits)
    circs, stats, xor_valid = [], [], []
    for s in range(uc.n_seeds):
        params = seed_params(uc.params, s)
        circ = C.find_circuits(params, spec, clfs, ps, dx, dy, k=cfg.uc.k,
                               keep_frac=cfg.keep_frac, n_sizes=cfg.n_sizes)
        stats.append(C.intersection_stats(jax.random.fold_in(key, s), params, spec, clfs, ps,
                                          circ, digits.x_test, digits.y_test, k=cfg.uc.k,
                                          n_random=cfg.n_random, tau=cfg.universal_tau,
                                          universal=univ.universal[s]))
        valid = np.repeat(np.isfinite(univ.threshold[s]), spec.n_latents)
        xor_valid.append(np.stack([((circ.gates[m] > 0) & (circ.gates[1 - m] == 0)
                                    & valid[None]).sum(1) for m in range(2)]))
        circs.append(circ)
    # the latents shared by most classes' intersections (seed 0) and their decoder images
    c0 = circs[0]
    inter = c0.gates[0] * c0.gates[1]
    score = inter.sum(0) + 1e-3 * np.abs(c0.scores).sum((0, 1))
    top = np.argsort(-score)[:8]
    imgs = C.decoder_images(seed_params(uc.params, 0), spec, clfs, ps, dx, top.tolist())
    st = stack(stats)
    return PairAnalysis(**{f.name: getattr(st, f.name) for f in dataclasses.fields(st)},
                        xor_valid=np.stack(xor_valid),
                        circuits=C.Circuits(*(np.stack(a) for a in zip(*circs, strict=True))),
                        univ=univ, top_latents=top, top_images=imgs)


def universality(key, cfg: Config, names, models: dict, uc: TranscoderRun, digits: Digits
                 ) -> Universality:
    """The calibrated universal latents of every seed of a transcoder stack
    (:func:`jaxkit.universal_circuits.universality.calibrated_universal` at
    ``cfg.universal_alpha``, the readings on the test images), stacked on a leading seed
    axis (:class:`.results.Universality`: ``universal (S, N)``, ``rho (S, D, F)``,
    ``threshold (S, D)``, the fractions ``(S,)``) with ``decoder_fraction`` ``(S,)`` (the
    uncalibrated decoder-share universality's)."""
    clfs, ps = load(cfg, names, models)
    sites = model_sites(clfs, ps, digits.x_test)
    rng = as_generator(key)
    per = []
    for s in range(uc.n_seeds):
        params = seed_params(uc.params, s)
        r = U.calibrated_universal(*U.read_correlation(params, uc.spec, sites),
                                   cfg.universal_alpha, rng)
        per.append(dataclasses.replace(r, decoder_fraction=float(np.mean(np.asarray(
            cc.universal_latents(params, uc.spec, cfg.universal_tau))))))
    return stack(per)


def single_baseline(cfg: Config, names, models: dict, singles: list[TranscoderRun],
                    digits: Digits) -> SingleBaseline:
    """Circuits of two independently trained single-model CLTs (``singles[m]``: of model
    ``m``, a stack of seeds, in the pair's shapes), matched by decoder (logit-effect)
    similarity; results stacked over seeds."""
    clfs, ps = load(cfg, names, models)
    dx, dy = discovery(cfg, digits)
    spec = singles[0].spec
    per_seed = []
    for s in range(singles[0].n_seeds):
        out, circs = [], []
        for m, uc in enumerate(singles):
            read, live = single_masks(spec, m)
            params = seed_params(uc.params, s)
            circs.append(C.find_circuits(params, spec, clfs, ps, dx, dy, k=cfg.uc.k,
                                         keep_frac=cfg.keep_frac, n_sizes=cfg.n_sizes,
                                         read=read, live=live))
            out.append((params, read, live))
        ratio, shared = C.matched_ratios(spec, clfs, ps, out, circs, digits.x_test,
                                         digits.y_test, k=cfg.uc.k, threshold=cfg.match_cos)
        per_seed.append(SingleBaseline(ratio=ratio, shared=shared, sizes=np.stack(
            [c.sizes[m] for m, c in enumerate(circs)])))
    return stack(per_seed)


def surgery(key, cfg: Config, names, models: dict, uc: TranscoderRun, digits: Digits,
            cls: int) -> SurgeryResult:
    """Write class ``cls`` into the receiver (``names[1]``, trained without it) from the
    giver's (``names[0]``) circuit, with every transcoder of the stack, and the controls
    (:mod:`.surgery`): a random gate of the circuit's size (drawn from ``key``), another
    class's circuit (``cls + 1``) written as ``cls``, and the receiver-only class-mean
    head; before / after / probe on the test images.

    Returns:
      A :class:`.results.SurgeryResult`.
    """
    clfs, ps = load(cfg, names, models)
    spec = uc.spec
    wrong = (cls + 1) % N_CLASSES
    dx, dy = discovery(cfg, digits)
    xt, yt = jnp.asarray(digits.x_test), digits.y_test
    N = spec.n_depths * spec.n_latents
    runs = {"surgery": [], "random": [], "wrong": []}
    sizes = []
    for s in range(uc.n_seeds):
        params = seed_params(uc.params, s)
        circ = C.find_circuits(params, spec, clfs, ps, dx, dy, k=cfg.uc.k,
                               keep_frac=cfg.keep_frac, n_sizes=cfg.n_sizes)
        gate = circ.gates[0, cls]
        rnd = np.zeros(N, np.float32)
        rnd[as_generator(jax.random.fold_in(key, s)).choice(N, int(gate.sum()),
                                                              replace=False)] = 1.0
        for tag, g in (("surgery", gate), ("random", rnd), ("wrong", circ.gates[0, wrong])):
            new = S.transfer(params, spec, 0, 1, cls, g, clfs, ps, cfg.ridge)
            runs[tag].append(S.evaluate(S.predictions(clfs[1], new, xt), yt, cls, N_CLASSES))
        sizes.append(int(gate.sum()))
    before = S.evaluate(S.predictions(clfs[1], ps[1], xt), yt, cls, N_CLASSES)
    afters = runs["surgery"]
    correct = np.mean([a.correct for a in afters], axis=0)
    after = dataclasses.replace(afters[0], correct=correct,
                                recall=float(correct[yt == cls].mean()),
                                other=float(correct[yt != cls].mean()))
    pr = S.evaluate(S.probe(clfs[1], ps[1], digits.x_train, digits.y_train, digits.x_test), yt,
                    cls, N_CLASSES)
    mean_head = S.class_mean_head(clfs[1], ps[1], dx, dy, cls)
    cm = S.evaluate(S.predictions(clfs[1], mean_head, xt), yt, cls, N_CLASSES)
    per = {f"{tag}_{k}": np.array([getattr(a, k) for a in runs[tag]])
           for tag in ("random", "wrong") for k in ("recall", "other")}
    return SurgeryResult(before=before, after=after, probe=pr, class_mean=cm,
                         circuit_size=sizes[0], circuit_sizes=np.asarray(sizes),
                         seed_recall=np.array([a.recall for a in afters]),
                         seed_other=np.array([a.other for a in afters]), **per,
                         cls=cls, wrong_cls=wrong, chance=1.0 / N_CLASSES,
                         y_test=np.asarray(yt))
