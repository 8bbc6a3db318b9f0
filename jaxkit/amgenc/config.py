"""Settings of the AMGenC run (``jaxkit run amgenc``): data, model, training, sampling,
post-relaxation and the claim tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

from .tables import KINDS, N_ATOMS_RANGE

__all__ = ["Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class Config(PipelineConfig):
    """AMGenC settings.

    Attributes:
        kind: composition family of the glass cells (``"silica"`` or ``"multi"``).
        other_kinds: further datasets run the same way after ``kind`` (each with its own
            data, held-out split, model and report section).
        user_train: extended XYZ / CIF file of your training cells ("" = generate
            ``n_train`` recipe cells; :mod:`jaxkit.amgenc.userdata`).
        user_test: the same for the held-out targets ("" = generate ``n_test``).
        n_train: training cells.
        n_test: held-out cells (the sampling targets and the RDF reference).
        n_atoms: (lo, hi) inclusive range of the atom-count target of a cell.
        relax_steps: melt-quench steps of the data recipe.
        min_steps: FIRE steps after the quench.
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
        scale_cells: cells of the large-cell throughput run (0: none;
            :mod:`jaxkit.amgenc.scale`).
        scale_atoms: atoms per cell of that run.
        scale_steps: noise levels of that run's sampler.
        scale_runs: timed sampling calls of that run (compiled ahead; the first timed
            call's cells are the ones checked; the median is reported).
        rdf_margin: equivalence margin (RDF L1, A) of "the projections keep the structure".
    """

    kind: Literal["silica", "multi"] = "multi"
    other_kinds: tuple[str, ...] = ("silica",)
    user_train: str = ""
    user_test: str = ""
    n_train: int = 160
    n_test: int = 24
    n_atoms: tuple[int, int] = (100, 256)
    relax_steps: int = 3000
    min_steps: int = 300
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
    scale_cells: int = 64
    scale_atoms: int = 800
    scale_steps: int = 200
    scale_runs: int = 1
    rdf_margin: float = 0.25

    def validate(self) -> None:
        require_at_least(self, ("n_train", "n_test", "hidden", "layers", "k_nbr", "train_steps",
                                "batch", "checkpoint_every", "samples_per_target",
                                "sample_steps", "timing_runs", "post_relax_steps",
                                "pressure_steps", "timing_cells", "scale_runs"))
        require_at_least(self, ("relax_steps",), 2)
        require_at_least(self, ("min_steps", "corrector_steps", "scale_cells"), 0)
        require_at_least(self, ("scale_steps",))
        require(N_ATOMS_RANGE[0] <= self.scale_atoms <= N_ATOMS_RANGE[1], "scale_atoms",
                f"must lie in {N_ATOMS_RANGE}; got {self.scale_atoms}")
        lo, hi = self.n_atoms
        require(N_ATOMS_RANGE[0] <= lo <= hi <= N_ATOMS_RANGE[1], "n_atoms",
                f"must satisfy {N_ATOMS_RANGE[0]} <= lo <= hi <= {N_ATOMS_RANGE[1]}; "
                f"got {self.n_atoms}")
        require(all(k in KINDS and k != self.kind for k in self.other_kinds)
                and len(set(self.other_kinds)) == len(self.other_kinds), "other_kinds",
                f"must hold distinct kinds of {KINDS} other than kind={self.kind!r}; "
                f"got {self.other_kinds}")
        require_positive(self, ("lr", "soft_eta", "rdf_margin", "snr"))
        require(0.0 <= self.balanced_share <= 1.0, "balanced_share",
                f"must lie in [0, 1]; got {self.balanced_share}")
        require(0.0 <= self.focus_share <= 1.0, "focus_share",
                f"must lie in [0, 1]; got {self.focus_share}")


QUICK = Config(
    other_kinds=(), n_train=24, n_test=8, n_atoms=(100, 128), relax_steps=400, min_steps=100,
    hidden=32, layers=2, train_steps=300, batch=8, lr=3e-3, checkpoint_every=100,
    samples_per_target=2, sample_steps=20, corrector_steps=0, timing_runs=2, timing_cells=16,
    post_relax_steps=150, pressure_steps=25, scale_cells=0, scale_steps=5)
FULL = Config(n_atoms=(100, 800))
