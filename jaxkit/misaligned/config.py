"""Misaligned-baselines configuration: data sets, splits, models, baseline family, tests.

``jaxkit run misaligned --set datasets=freesolv --set seeds=10``. Each data set is
featurised (``n_bits`` Morgan bits, graphs padded to ``max_atoms``), optionally
subsampled to ``max_molecules``, split ``seeds`` times at random and ``seeds`` times by
scaffold (``test_fraction`` in test); both models train ``steps`` AdamW steps (batch
``batch_size``, learning rate ``lr``) in compiled chunks of ``log_every`` steps with a
checkpoint every ``checkpoint_every`` chunks. The baseline family uses ridge penalty
``ridge_lambda``, perturbation fractions ``fractions`` and carbon insertions into the test inputs
``carbon_inserted_strengths`` (``carbon_inserted_variants`` random variants each); the best
misaligned baseline is chosen on validation sets, ``val_fraction`` of each training set
split off as the outer split was made. Gaps are bootstrapped ``n_boot`` times.
Renz et al.'s generative AddCarbon baseline draws ``addcarbon_samples`` molecules from
each data set's first random training set (:mod:`jaxkit.misaligned.addcarbon`; 0 skips
it).
``models`` picks the models under audit out of ``mlp`` (fingerprint MLP), ``mpnn``
(atom-only MPNN, ``mpnn_width`` / ``mpnn_rounds``) and ``dmpnn`` (chemprop's bond-aware
directed MPNN, :mod:`jaxkit.misaligned.dmpnn`: ``dmpnn_width``, ``dmpnn_steps`` message
steps, ``dmpnn_aggregation`` "mean" or "sum" over atoms).
``classification`` adds the solubility classes task (needs ``solubility`` in
``datasets``). ``branches`` adds the other branches of drug discovery
(:mod:`jaxkit.misaligned.branches`): ``dti`` (Davis drug-target interactions, random /
cold-drug / cold-target splits) and ``screening`` (DUD-E actives vs property-matched
decoys of ``dude_targets``); ``chance_margin`` is the decoy-bias row's margin (AUROC above
1/2 + it), fixed like the others.

The paper claim's margins, fixed before the run (never from measured data): a misaligned
baseline is *competitive* with a model when the model's RMSE advantage over it is below
``competitive_fraction`` x the data set's stated experimental error (a literature value
shipped with the data: solubility 0.6 log units, FreeSolv 0.6 kcal/mol, ChEMBL 0.5 pIC50),
or, on the classification task, its AUROC advantage below ``auroc_margin``.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_distinct

__all__ = ["Config", "QUICK", "FULL"]

_DATASETS = ("solubility", "freesolv", "chembl")
_MODELS = ("mlp", "mpnn", "dmpnn")
_BRANCHES = ("dti", "screening")
_DUDE = ("ada", "fak1", "hs90a")  # jaxkit.data.drug_discovery.DUDE_TARGETS


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run misaligned`` (see the module docstring)."""

    datasets: tuple[str, ...] = _DATASETS
    max_molecules: int | None = None
    seeds: int = 5
    test_fraction: float = 0.2
    n_bits: int = 2048
    max_atoms: int = 48
    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    log_every: int = 50
    checkpoint_every: int = 4
    mlp_width: int = 256
    mpnn_width: int = 64
    mpnn_rounds: int = 3
    models: tuple[str, ...] = _MODELS
    dmpnn_width: int = 64
    dmpnn_steps: int = 3
    dmpnn_aggregation: str = "mean"
    ridge_lambda: float = 3.0
    fractions: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    carbon_inserted_strengths: tuple[int, ...] = (1, 2, 3)
    carbon_inserted_variants: int = 2
    n_boot: int = 1000
    val_fraction: float = 0.2
    competitive_fraction: float = 0.33
    auroc_margin: float = 0.02
    classification: bool = True
    addcarbon_samples: int = 1000
    branches: tuple[str, ...] = _BRANCHES
    dude_targets: tuple[str, ...] = _DUDE
    chance_margin: float = 0.1

    def validate(self) -> None:
        require_distinct("datasets", self.datasets, "data set")
        bad = [d for d in self.datasets if d not in _DATASETS]
        require(not bad, "datasets", f"must be out of {', '.join(_DATASETS)}; got {bad}")
        require_distinct("models", self.models, "model")
        bad = [m for m in self.models if m not in _MODELS]
        require(not bad, "models",
                f"must be one or more of {', '.join(_MODELS)}; got {list(self.models)}")
        require(self.dmpnn_aggregation in ("mean", "sum"), "dmpnn_aggregation",
                f"must be 'mean' or 'sum'; got {self.dmpnn_aggregation!r}")
        require_at_least(self, ("seeds",), 2)
        require_at_least(self, ("n_bits", "max_atoms", "steps", "batch_size", "log_every",
                                "checkpoint_every", "mlp_width", "mpnn_width", "mpnn_rounds",
                                "dmpnn_width", "dmpnn_steps",
                                "carbon_inserted_variants", "n_boot"))
        require(self.max_molecules is None or self.max_molecules >= 20, "max_molecules",
                f"must be None or >= 20; got {self.max_molecules}")
        require(0 < self.test_fraction < 1, "test_fraction",
                f"must lie in (0, 1); got {self.test_fraction}")
        require(self.steps % self.log_every == 0, "steps",
                f"must be a multiple of log_every ({self.log_every}); got {self.steps}")
        require(self.lr > 0 and self.ridge_lambda > 0 and self.weight_decay >= 0, "lr",
                "lr and ridge_lambda must be > 0, weight_decay >= 0")
        require(len(self.fractions) >= 1 and all(0 <= f <= 1 for f in self.fractions)
                and self.fractions[-1] == 1.0, "fractions",
                f"must be values in [0, 1] ending at 1.0; got {self.fractions}")
        require(len(self.carbon_inserted_strengths) >= 1
                and all(k >= 1 for k in self.carbon_inserted_strengths),
                "carbon_inserted_strengths",
                f"must be integers >= 1; got {self.carbon_inserted_strengths}")
        for f in ("competitive_fraction", "auroc_margin"):
            require(getattr(self, f) > 0, f, f"must be > 0; got {getattr(self, f)}")
        require(self.addcarbon_samples >= 0, "addcarbon_samples",
                f"must be >= 0; got {self.addcarbon_samples}")
        require(0 < self.val_fraction < 1, "val_fraction",
                f"must lie in (0, 1); got {self.val_fraction}")
        for f, allowed in (("branches", _BRANCHES), ("dude_targets", _DUDE)):
            v = getattr(self, f)  # may be empty: no branch, or no screening target
            bad = [b for b in v if b not in allowed]
            require(not bad and len(set(v)) == len(v), f,
                    f"must be distinct values out of {', '.join(allowed)}; got {list(v)}")
        require("screening" not in self.branches or len(self.dude_targets) >= 1,
                "dude_targets", "must name at least one target when screening runs")
        require(0 < self.chance_margin < 0.5, "chance_margin",
                f"must lie in (0, 0.5); got {self.chance_margin}")


QUICK = Config(max_molecules=160, seeds=3, n_bits=512, steps=100, batch_size=32,
               log_every=50, checkpoint_every=1, mlp_width=64, mpnn_width=32, mpnn_rounds=2,
               dmpnn_width=32, dmpnn_steps=2,
               fractions=(0.0, 0.5, 1.0), carbon_inserted_strengths=(1, 3),
               carbon_inserted_variants=1, n_boot=200, lr=3e-3,
               addcarbon_samples=100, dude_targets=("ada",))
FULL = Config()
