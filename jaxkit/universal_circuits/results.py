"""Typed results of the Universal Circuits pipeline: what the experiment modules hand to
each other and to :mod:`.report` (frozen dataclasses, picklable, so
:meth:`RunContext.stage` caches them).

Who makes and who reads each type (``S`` transcoder seeds of a stack, ``M = 2`` models,
``C`` classes, ``N = D * F`` latents over ``D`` depths of ``F``, ``K`` prefix sizes):

* :class:`ModelRun` (:func:`.experiment.train_model`): a trained classifier; read by the
  other stages (its parameters), the pipeline's metrics and the setup claims (``correct``).
* :class:`TranscoderRun` (:func:`.experiment.train_pair`): a stack of ``S`` transcoders
  over a pair; read by every analysis stage.
* :class:`TranscoderEval` (:func:`.experiment.uc_eval`): reconstruction and output
  fidelity; read by the report and the metrics.
* :class:`IntersectionStats` (:func:`.circuits.intersection_stats`, one transcoder) and
  :class:`PairAnalysis` (:func:`.experiment.pair_analysis`: the same stacked over seeds,
  with the circuits, the calibrated universality and the top latents' images); read by
  the report's tables, figures and claims.
* :class:`Faithfulness` (:func:`.circuits.faithfulness` per transcoder,
  :func:`.experiment.circuit_faithfulness` stacked) and its per-model means
  :class:`FaithfulnessSummary`; read by the report.
* :class:`Universality` (:func:`.universality.calibrated_universal` per transcoder,
  :func:`.experiment.universality` stacked, with the decoder-share fraction); inside
  :class:`PairAnalysis` and the misaligned control; read by the report.
* :class:`SingleBaseline` (:func:`.experiment.single_baseline`): the decoder-matched
  single-model CLTs; read by the report.
* :class:`SurgeryEval` (:func:`.surgery.evaluate`) and :class:`SurgeryResult`
  (:func:`.experiment.surgery`): one held-out class written into its receiver, with the
  controls; read by the report.
* :class:`UserTranscoder` / :class:`UserFit` (:func:`.userdata.fit_user`) and
  :class:`UserCircuits` (:func:`.usercircuits.user_circuits`): the user's-activations
  path; read by the pipeline, :mod:`.usercircuits` and their markdown.

Per-transcoder results carry no seed axis; :func:`stack` stacks them on a leading seed
axis (every array field gains ``S`` in front). ``as_dict`` gives the plain mapping that
``metrics.json`` records for the type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

if TYPE_CHECKING:  # circuits.py imports this module
    from .circuits import Circuits

__all__ = ["stack", "ModelRun", "TranscoderRun", "TranscoderEval", "IntersectionStats",
           "Universality", "PairAnalysis", "Faithfulness", "FaithfulnessSummary",
           "SingleBaseline", "SurgeryEval", "SurgeryResult", "UserTranscoder", "UserFit",
           "UserSurgery", "UserCircuits"]

T = TypeVar("T")


def stack(results: list[T]) -> T:
    """One result of the same type whose fields are those of ``results`` stacked on a new
    leading (seed) axis (``np.stack``; fields None in the first stay None)."""
    first = results[0]
    return dataclasses.replace(first, **{
        f.name: np.stack([np.asarray(getattr(r, f.name)) for r in results])
        for f in dataclasses.fields(first) if getattr(first, f.name) is not None})


def _plain(obj, skip=()) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)
            if f.name not in skip and getattr(obj, f.name) is not None}


@dataclass(frozen=True, kw_only=True)
class ModelRun:
    """A trained classifier: ``leaves`` its parameters (NumPy leaves,
    :meth:`.models.Classifier.to_numpy`), ``history`` its training log and ``correct``
    ``(n_test,)`` its per-image test correctness (0/1)."""

    leaves: Any
    history: list
    correct: np.ndarray

    @property
    def accuracy(self) -> float:
        """Test accuracy (what ``metrics.json`` records as ``model_accuracy``)."""
        return float(self.correct.mean())


@dataclass(frozen=True, kw_only=True)
class TranscoderRun:
    """A stack of independently trained transcoders over the models of a pair: ``spec``
    (:class:`jaxkit.kernels.crosscoder.UCSpec`), ``params`` (NumPy leaves with a leading
    seed axis ``S``), ``history`` the training log, ``single`` the model of a single-model
    CLT (None: the joint transcoder)."""

    spec: Any
    params: Any
    history: Any
    single: int | None = None

    @property
    def n_seeds(self) -> int:
        """``S``, the transcoders in the stack."""
        import jax

        return int(jax.tree.leaves(self.params)[0].shape[0])


@dataclass(frozen=True, kw_only=True)
class TranscoderEval:
    """Reconstruction and fidelity on the test images, every seed of a stack: ``fvu (S,
    n_layers)`` per site, ``kl (S,)`` (mean over single spliced sites), ``l0 (S,)``,
    ``replacement_acc (S, M)``; the replacement model's ``agreement``,
    ``kl_replacement``, ``kl_fidelity`` ``(S, M)`` and the mean ablation's
    ``baseline_agreement``, ``baseline_kl`` ``(M,)``; ``layers`` the sites' (model,
    layer, depth)."""

    fvu: np.ndarray
    kl: np.ndarray
    l0: np.ndarray
    replacement_acc: np.ndarray
    layers: list
    agreement: np.ndarray
    kl_replacement: np.ndarray
    kl_fidelity: np.ndarray
    baseline_agreement: np.ndarray
    baseline_kl: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        """Every field but ``layers`` (``metrics.json``'s ``transcoders`` entry)."""
        return _plain(self, skip=("layers",))


@dataclass(frozen=True, kw_only=True)
class IntersectionStats:
    """Intersections of one transcoder's class circuits, their ratios and baselines
    (:func:`.circuits.intersection_stats`): ``shared (C,)`` latents per intersection,
    ``ratio``, ``acc_intersection``, ``acc_circuit``, ``acc_full``, ``random_ratio``,
    ``top_ratio`` (the top-``|I|`` attribution subset), ``one_only`` (universal latents in
    one model's circuit only), ``xor`` (all latents so), ``precision`` and ``f1`` ``(M,
    C)``; ``universal`` ``(N,)`` bool (the ones used), ``decoder_universal`` ``(N,)``
    bool, ``empty`` ``(C,)`` bool. Stacked (:class:`PairAnalysis`): a leading ``S``."""

    shared: np.ndarray
    ratio: np.ndarray
    acc_intersection: np.ndarray
    acc_circuit: np.ndarray
    acc_full: np.ndarray
    random_ratio: np.ndarray
    top_ratio: np.ndarray
    one_only: np.ndarray
    xor: np.ndarray
    universal: np.ndarray
    decoder_universal: np.ndarray
    empty: np.ndarray
    precision: np.ndarray
    f1: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Universality:
    """Calibrated universal latents of one transcoder
    (:func:`.universality.calibrated_universal`): ``universal (N,)`` bool, ``rho (D, F)``
    matched correlations, ``threshold (D,)`` (inf at a depth one model does not read),
    the fractions ``fraction`` (over all latents), ``null_fraction`` (the shuffled
    pairing's rate), ``valid_fraction`` (depths both models read) and
    ``valid_universal_fraction`` (universal over those depths' latents); with
    :func:`.experiment.universality` also ``decoder_fraction`` (the uncalibrated
    decoder-share universality's) and a leading seed axis on every field."""

    universal: np.ndarray
    rho: np.ndarray
    threshold: np.ndarray
    fraction: Any
    null_fraction: Any
    valid_fraction: Any
    valid_universal_fraction: Any
    decoder_fraction: Any = None

    def as_dict(self) -> dict[str, Any]:
        """Every field but ``universal`` (the user path's ``circuits.universality``)."""
        return _plain(self, skip=("universal",))

    def control_dict(self) -> dict[str, Any]:
        """``universal_fraction`` and ``decoder_fraction`` (``metrics.json``'s
        ``misaligned`` entry)."""
        return dict(universal_fraction=self.valid_universal_fraction,
                    decoder_fraction=self.decoder_fraction)


@dataclass(frozen=True, kw_only=True)
class PairAnalysis(IntersectionStats):
    """A pair's circuits and intersections over the transcoder seeds
    (:func:`.experiment.pair_analysis`): the :class:`IntersectionStats` fields with a
    leading ``S``, plus ``xor_valid (S, M, C)`` (one-model-only latents at depths both
    models read), ``circuits`` (:class:`.circuits.Circuits` with a leading ``S`` on every
    field), ``univ`` (the stacked :class:`Universality`), ``top_latents (8,)`` (seed 0's
    most shared latents) and ``top_images (M, 8, P)`` (their decoders in each model's
    input space)."""

    xor_valid: np.ndarray
    circuits: Circuits
    univ: Universality
    top_latents: np.ndarray
    top_images: np.ndarray

    @property
    def n_seeds(self) -> int:
        return int(self.ratio.shape[0])

    def as_dict(self) -> dict[str, Any]:
        """``metrics.json``'s ``pairs`` entry."""
        return dict(ratio=self.ratio, random_ratio=self.random_ratio,
                    top_ratio=self.top_ratio,
                    universal_fraction=self.univ.valid_universal_fraction,
                    universal_null=self.univ.null_fraction, shared=self.shared,
                    one_only=self.one_only, precision=self.precision, f1=self.f1,
                    circuit_sizes=self.circuits.sizes)


@dataclass(frozen=True, kw_only=True)
class Faithfulness:
    """Circuit faithfulness on the test images (:func:`.circuits.faithfulness`): ``acc``,
    ``logit`` ``(M, C, 5)`` under the gates of :data:`.circuits.FAITH_GATES`;
    ``circuit_acc``, ``inter_acc`` ``(M, C)`` as fractions of the full replacement's;
    ``circuit_logit``, ``inter_logit`` ``(M, C)`` normalised logit faithfulness,
    ``logit_valid`` ``(M, C)`` where it is defined. Stacked
    (:func:`.experiment.circuit_faithfulness`): a leading ``S``."""

    acc: np.ndarray
    logit: np.ndarray
    circuit_acc: np.ndarray
    inter_acc: np.ndarray
    circuit_logit: np.ndarray
    inter_logit: np.ndarray
    logit_valid: np.ndarray

    def summary(self) -> FaithfulnessSummary:
        """Of the stacked form: per model, the means over seeds and classes; the logit
        faithfulness over the (seed, class) cells where it is defined (``n_undefined``
        the others: the full and the empty replacement give the class the same logit)."""
        valid = np.asarray(self.logit_valid, bool)

        def vmean(a):
            a = np.asarray(a, np.float64)
            return (np.where(valid, a, 0).sum((0, 2))
                    / np.maximum(valid.sum((0, 2)), 1)).tolist()

        return FaithfulnessSummary(circuit_acc=np.mean(self.circuit_acc, (0, 2)).tolist(),
                                   inter_acc=np.mean(self.inter_acc, (0, 2)).tolist(),
                                   circuit_logit=vmean(self.circuit_logit),
                                   inter_logit=vmean(self.inter_logit),
                                   n_undefined=(~valid).sum((0, 2)).tolist())

    def as_dict(self) -> dict[str, list]:
        """:meth:`summary` as a mapping (``metrics.json``'s ``faithfulness`` entry)."""
        return self.summary()._asdict()


class FaithfulnessSummary(NamedTuple):
    """Per model ``(M,)`` lists (:meth:`Faithfulness.summary`): mean ``circuit_acc``,
    ``inter_acc``, ``circuit_logit``, ``inter_logit`` and the ``n_undefined`` (seed,
    class) cells of the logit faithfulness."""

    circuit_acc: list
    inter_acc: list
    circuit_logit: list
    inter_logit: list
    n_undefined: list


@dataclass(frozen=True, kw_only=True)
class SingleBaseline:
    """Two independently trained single-model CLTs matched by decoder similarity
    (:func:`.experiment.single_baseline`): ``ratio (S, M, C)`` accuracy with the matched
    latents over the circuit's, ``shared (S, M, C)`` matched latents, ``sizes (S, M, C)``
    the circuits' sizes."""

    ratio: np.ndarray
    shared: np.ndarray
    sizes: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        """``ratio`` and ``shared`` (``metrics.json``'s ``single_matched`` entry)."""
        return dict(ratio=self.ratio, shared=self.shared)


@dataclass(frozen=True, kw_only=True)
class SurgeryEval:
    """A receiver's predictions on the test images (:func:`.surgery.evaluate`): the
    held-out class's ``recall``, the ``other`` classes' accuracy, per-image ``correct``
    ``(n_test,)`` and the ``confusion`` matrix ``(C, C)`` (both None in
    :class:`UserSurgery`)."""

    recall: float
    other: float
    correct: np.ndarray | None = None
    confusion: np.ndarray | None = None

    def as_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class SurgeryResult:
    """Class ``cls`` written into the receiver trained without it
    (:func:`.experiment.surgery`): ``before``, ``after`` (per-image correctness averaged
    over the seeds, the confusion matrix of seed 0), ``probe``, ``class_mean``
    (:class:`SurgeryEval`); per seed ``(S,)`` ``seed_recall`` / ``seed_other`` of the
    surgery and ``random_recall`` / ``random_other``, ``wrong_recall`` / ``wrong_other``
    of the controls, ``circuit_sizes``; ``circuit_size`` (seed 0's), ``wrong_cls`` (the
    class whose circuit is the control), ``chance``, ``y_test (n_test,)``."""

    before: SurgeryEval
    after: SurgeryEval
    probe: SurgeryEval
    class_mean: SurgeryEval
    circuit_size: int
    circuit_sizes: np.ndarray
    seed_recall: np.ndarray
    seed_other: np.ndarray
    random_recall: np.ndarray
    random_other: np.ndarray
    wrong_recall: np.ndarray
    wrong_other: np.ndarray
    cls: int
    wrong_cls: int
    chance: float
    y_test: np.ndarray

    def as_dict(self) -> dict[str, tuple[float, float]]:
        """(recall, other) of ``before``, ``after``, ``probe``, ``class_mean`` and the
        seed means of the ``random`` and ``wrong`` controls (``metrics.json``'s
        ``surgery`` entry)."""
        out = {k: (getattr(self, k).recall, getattr(self, k).other)
               for k in ("before", "after", "probe", "class_mean")}
        return dict(out, random=(float(self.random_recall.mean()),
                                 float(self.random_other.mean())),
                    wrong=(float(self.wrong_recall.mean()), float(self.wrong_other.mean())))


@dataclass(frozen=True, kw_only=True)
class UserTranscoder:
    """The transcoder on the user's aligned or misaligned rows (:func:`.userdata.fit_user`):
    ``fvu`` per site and ``recon`` on the evaluation rows, ``universal_per_depth`` (D,)
    decoder-share universal latents, ``history``, ``params`` (NumPy leaves)."""

    fvu: list
    recon: float
    universal_per_depth: list
    history: Any
    params: Any

    def as_dict(self) -> dict[str, Any]:
        """Every field but ``params``."""
        return _plain(self, skip=("params",))


@dataclass(frozen=True, kw_only=True)
class UserFit:
    """:func:`.userdata.fit_user`: the user's ``models``, their site widths ``d_sites``,
    ``n`` rows, the ``aligned`` and ``misaligned`` :class:`UserTranscoder`, the
    transcoder's ``spec`` and its sites' names ``layers``."""

    models: list
    d_sites: list
    n: int
    aligned: UserTranscoder
    misaligned: UserTranscoder
    spec: Any
    layers: list

    def as_dict(self) -> dict[str, Any]:
        """Every field but ``spec`` (and the transcoders' parameters)."""
        return dict(models=self.models, d_sites=self.d_sites, n=self.n,
                    aligned=self.aligned.as_dict(), misaligned=self.misaligned.as_dict(),
                    layers=self.layers)


@dataclass(frozen=True, kw_only=True)
class UserSurgery:
    """One class written back into the second model's head on the user's rows: the
    circuit's ``size`` and :class:`SurgeryEval` (recall and other only) ``before`` (the
    head without the class), ``after`` and with a ``random`` gate."""

    size: int
    before: SurgeryEval
    after: SurgeryEval
    random: SurgeryEval

    def as_dict(self) -> dict[str, Any]:
        return dict(size=self.size, before=self.before.as_dict(),
                    after=self.after.as_dict(), random=self.random.as_dict())


@dataclass(frozen=True, kw_only=True)
class UserCircuits:
    """:func:`.usercircuits.user_circuits`: ``heads`` (per model "user" or "fitted"),
    ``head_acc`` (M,), ``circuit_sizes (M, C)``, the :class:`Universality` ``universality``,
    the intersection statistics ``shared (C,)``, ``ratio``, ``random_ratio``,
    ``top_ratio``, ``one_only`` ``(M, C)``, ``empty (C,)``, and ``surgery`` per class."""

    heads: list
    head_acc: list
    circuit_sizes: np.ndarray
    universality: Universality
    shared: np.ndarray
    ratio: np.ndarray
    random_ratio: np.ndarray
    top_ratio: np.ndarray
    one_only: np.ndarray
    empty: np.ndarray
    surgery: dict[int, UserSurgery] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """``metrics.json``'s ``circuits`` entry."""
        out = _plain(self)
        out["universality"] = self.universality.as_dict()
        out["surgery"] = {c: s.as_dict() for c, s in self.surgery.items()}
        return out
