"""Settings of the AMGenC run (``jaxkit run amgenc``): data, model, training, sampling,
post-relaxation and the claim tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

from .tables import KINDS, N_ATOMS_RANGE

__all__ = ["ScaleSettings", "Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class ScaleSettings(PipelineConfig):
    """The large-cell throughput run (:mod:`jaxkit.amgenc.scale`), the section ``scale``
    of :class:`Config` (``--set scale.cells=0``).

    Attributes:
        cells: cells of the large-cell throughput run (0: none).
        atoms: atoms per cell of that run.
        steps: noise levels of that run's sampler.
        runs: timed sampling calls of that run (compiled ahead; the first timed
            call's cells are the ones checked; the median is reported).
    """

    cells: int = 64
    atoms: int = 800
    steps: int = 200
    runs: int = 1

    def validate(self) -> None:
        require_at_least(self, ("runs", "steps"))
        require_at_least(self, ("cells",), 0)
        require(N_ATOMS_RANGE[0] <= self.atoms <= N_ATOMS_RANGE[1], "atoms",
                f"must lie in {N_ATOMS_RANGE}; got {self.atoms}")


@dataclass(frozen=True)
class Config(PipelineConfig):
    """AMGenC settings.

    Attributes:
        kind: composition family of the glass cells (``"silica"`` or ``"multi"``).
        dataset: how the cells are made: ``"published"`` (the default:
            molecular-dynamics melt-quench with published potentials, BKS for silica and
            Pedone 2006 for multi-component silicates, :mod:`jaxkit.amgenc.melt_quench`;
            a cached stage) or ``"recipe"`` (jaxkit's toy pair potential and overdamped
            melt-quench of :mod:`jaxkit.amgenc.glass`, the data of the records made
            before 2026-12-07; it covers B2O3, which Pedone does not).
        md_steps: velocity-Verlet steps (1 fs) of the ``"published"`` melt-quench.
        other_kinds: further datasets run the same way after ``kind`` (each with its own
            data, held-out split, model and report section).
        user_train: extended XYZ / CIF file (or the pipeline's own ``.npz``) of your
            training cells, cubic or orthorhombic ("" = generate ``n_train`` recipe
            cells; :mod:`jaxkit.amgenc.userdata`).
        user_test: the same for the held-out targets ("" = generate ``n_test``).
        n_train: training cells.
        n_test: held-out cells (the sampling targets and the RDF reference).
        n_atoms: (lo, hi) inclusive range of the atom-count target of a cell.
        relax_steps: melt-quench steps of the data recipe.
        min_steps: FIRE steps after the quench.
        condition_cn: condition the generator on the target's network-former O
            coordination too (z-scored like the density; :mod:`jaxkit.amgenc.data`), so
            the design-accuracy rows ask for a density, a composition and a coordination
            (inverse design on properties); False conditions on density and composition
            only, as the records made before it.
        baseline_model: also train a separately trained unconstrained model, the
            AMDEN-style baseline (the same denoiser and training cells, plain element
            noise: ``balanced_share = 0``), and sample it with no charge mechanism; the
            paper row "without sacrificing inverse design accuracy" compares AMGenC with
            it (the same model's unconstrained arm is an extension row).
        hidden: width of the denoiser.
        layers: message-passing layers.
        k_nbr: nearest neighbours per atom in the graph.
        train_steps: Adam steps.
        batch: cells per training step.
        lr: Adam learning rate.
        balanced_share: share of training cells whose element noise is charge balanced.
        checkpoint_every: training steps between checkpoints.
        samples_per_target: cells sampled per held-out target.
        augment: apply a random cubic-cell symmetry to every training cell.
        focus_share: share of training cells whose noise level is drawn in
            :data:`jaxkit.amgenc.model.FOCUS_BAND` (the levels where atoms separate)
            instead of uniformly in log sigma (:func:`jaxkit.amgenc.model.loss`).
        sample_steps: noise levels (predictor steps) of the sampler.
        corrector_steps: Langevin corrector steps per noise level.
        snr: signal-to-noise ratio of the corrector step size.
        soft_eta: strength of the soft charge projection (when switched on).
        soft_target: what the soft projection moves (see :func:`jaxkit.amgenc.model.sample`).
        timing_runs: timing rounds of the sampling (every mechanism once per round, on
            the timing batch; the median and the paired per-round overheads with their
            interval are reported), and timed calls of each final projection.
        timing_cells: cells of the timing batch (the sampled cells around the median
            size, :func:`jaxkit.amgenc.sample.timing_indices`).
        post_relax_steps: FIRE steps of the post-relaxation of the AMGenC cells.
        pressure_steps: FIRE steps per box-rescaling round of the relaxation at the
            recipe's pressure (:func:`jaxkit.amgenc.design.relax_at_pressure`).
        scale: the large-cell throughput run, the section ``scale``
            (:class:`ScaleSettings`; ``--set scale.cells=0`` skips it).
        rdf_margin: equivalence margin (RDF L1, A) of "the projections keep the structure".
        margin_density, margin_composition, margin_former_cn: non-inferiority margins of
            "without sacrificing inverse design accuracy": the largest increase of the
            AMGenC arm's per-cell error over the unconstrained arm's that still counts
            as not sacrificed (relative density, composition L1, mean former O
            coordination); see the comment at the fields.
        judge: the potential that scores plausibility and design accuracy
            (:mod:`jaxkit.amgenc.judge`): ``"auto"`` picks one that did not make the
            data; naming the generator's potential (or a composite judge holding it,
            ``"pedone+teter"``) is an error.
        judge_steps: FIRE steps of each of the judge's relaxations.
        judge_rounds: box-rescaling rounds of the judge's relaxation at the target's
            pressure (design accuracy).
        mitigate_share: "effectively mitigates": the share of the draws that must come
            out as balanced cells for an existing method (:mod:`jaxkit.amgenc.baselines`)
            to count as mitigating charge imbalance (with its composition error within
            ``margin_composition`` of the unconstrained draws').
        min_cells: the fewest held-out cells (your ``user_test`` cells, or generated
            ones) from which the paper rows are decided; below it they are withheld
            (a row says so).
        overhead_margin: "minimal additional computational overhead": the largest extra
            sampling time of AMGenC over unconstrained sampling (soft projection at every
            step plus the final discrete projection), as a fraction of the unconstrained
            sampling time.
    """

    kind: Literal["silica", "multi"] = "multi"
    dataset: Literal["recipe", "published"] = "published"
    md_steps: int = 12000
    other_kinds: tuple[str, ...] = ("silica",)
    user_train: str = ""
    user_test: str = ""
    n_train: int = 160
    n_test: int = 24
    n_atoms: tuple[int, int] = (100, 256)
    relax_steps: int = 3000
    min_steps: int = 300
    condition_cn: bool = True
    baseline_model: bool = True
    hidden: int = 64
    layers: int = 3
    k_nbr: int = 12
    train_steps: int = 3000
    batch: int = 16
    lr: float = 1e-3
    balanced_share: float = 0.5
    checkpoint_every: int = 200
    samples_per_target: int = 4
    augment: bool = True
    focus_share: float = 0.5
    sample_steps: int = 200
    corrector_steps: int = 1
    snr: float = 0.3
    soft_eta: float = 1.0
    soft_target: Literal["endpoint", "state"] = "endpoint"
    timing_runs: int = 5
    timing_cells: int = 4
    post_relax_steps: int = 300
    pressure_steps: int = 100
    scale: ScaleSettings = ScaleSettings()
    rdf_margin: float = 0.25
    judge: Literal["auto", "bks", "pedone", "teter", "pedone+teter", "recipe"] = "auto"
    judge_steps: int = 200
    judge_rounds: int = 4
    # "Effectively mitigates" (issue 64, fixed before the first run with the existing
    # methods): nine draws in ten give a balanced cell; a method that needs more than
    # ~1.1 draws per usable cell, or that buys balance with composition error, does not.
    mitigate_share: float = 0.9
    # Paper rows need at least this many held-out cells (2 per claim family was too few
    # to say anything; 8 targets is the quick run's size)
    min_cells: int = 8
    # Margins of the paper claims, fixed here before any run (issue 57). Design accuracy
    # (they were chosen with the first design table, 2026-11, and are fixed since): relative
    # density 0.02 (the recipe's own seed-to-seed spread, the twin row, is about 0.03),
    # composition L1 0.02 (one atom of a 100-atom cell given another element), mean former
    # O coordination 0.05 (about the twin's spread, 0.045).
    margin_density: float = 0.02
    margin_composition: float = 0.02
    margin_former_cn: float = 0.05
    # "Minimal overhead": at most a tenth of the unconstrained sampling time, upper 95%
    # bound of the per-round overhead (the paper gives no number; a tenth is the most we
    # would still call minimal for a step that runs inside every one of the sampler's steps)
    overhead_margin: float = 0.10

    def validate(self) -> None:
        require_at_least(self, ("n_train", "n_test", "hidden", "layers", "k_nbr", "train_steps",
                                "batch", "checkpoint_every", "samples_per_target",
                                "sample_steps", "timing_runs", "post_relax_steps",
                                "pressure_steps", "timing_cells",
                                "judge_steps", "min_cells"))
        require_at_least(self, ("relax_steps",), 2)
        require_at_least(self, ("md_steps",), 4)
        require_at_least(self, ("min_steps", "corrector_steps", "judge_rounds"), 0)
        for kind in (self.kind, *self.other_kinds):  # the judge never made the data
            made = "recipe" if self.dataset == "recipe" else (
                "bks" if kind == "silica" else "pedone")
            require(made not in self.judge.split("+"), "judge",  # a composite's members
                    f"{self.judge!r} made the {self.dataset} {kind} cells; an independent "
                    "judge must be another potential (or 'auto')")
        require(0.0 < self.mitigate_share <= 1.0, "mitigate_share",
                f"must lie in (0, 1]; got {self.mitigate_share}")
        lo, hi = self.n_atoms
        require(N_ATOMS_RANGE[0] <= lo <= hi <= N_ATOMS_RANGE[1], "n_atoms",
                f"must satisfy {N_ATOMS_RANGE[0]} <= lo <= hi <= {N_ATOMS_RANGE[1]}; "
                f"got {self.n_atoms}")
        require(all(k in KINDS and k != self.kind for k in self.other_kinds)
                and len(set(self.other_kinds)) == len(self.other_kinds), "other_kinds",
                f"must hold distinct kinds of {KINDS} other than kind={self.kind!r}; "
                f"got {self.other_kinds}")
        require_positive(self, ("lr", "soft_eta", "rdf_margin", "snr", "margin_density",
                                "margin_composition", "margin_former_cn", "overhead_margin"))
        require(0.0 <= self.balanced_share <= 1.0, "balanced_share",
                f"must lie in [0, 1]; got {self.balanced_share}")
        require(0.0 <= self.focus_share <= 1.0, "focus_share",
                f"must lie in [0, 1]; got {self.focus_share}")


QUICK = Config(
    other_kinds=(), n_train=24, n_test=8, n_atoms=(100, 128), relax_steps=400, min_steps=100,
    hidden=32, layers=2, train_steps=300, batch=8, lr=3e-3, checkpoint_every=100,
    samples_per_target=2, sample_steps=20, corrector_steps=0, timing_runs=4, timing_cells=8,
    post_relax_steps=150, pressure_steps=25, scale=ScaleSettings(cells=0, steps=5),
    md_steps=3000, judge_steps=60, judge_rounds=2)
FULL = Config(n_atoms=(100, 800))
