"""CausalTab configuration: benchmarks, methods, training and the claim tests.

``jaxkit run causaltab --set ds=10,20 --set n_datasets=20``. ``train_steps = 0`` uses the
shipped weights (``jaxkit/causaltab/weights/``) unchanged; ``train_steps > 0`` trains
from scratch for that many steps on the broad prior (the full run), checkpointed under
the run folder so a killed run resumes. Each synthetic benchmark cell has ``n_datasets``
datasets of ``n`` rows at every ``d`` in ``ds``; ``int_fracs`` are the interventional
fractions of the mixed-interventional sweep; ``semantic_seeds`` datasets per expert
network; ``margin`` is the equivalence margin (AUROC units) of the "matches" tests.

The prior ablation (``ablation_steps > 0``; off in QUICK): two models of the shipped
architecture (``max_vars = 20``), trained for ``ablation_steps`` steps of
``ablation_batch`` tasks from the same seed, one on the broad prior and one on the
narrow prior, then scored on the same ``n_datasets`` datasets per cell of
``ablation_d`` variables (at most 10, inside the narrow prior's range) and
``ablation_n`` rows (also the training ``n_max``), in and out of distribution, at the
smallest and the largest of ``int_fracs``.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

__all__ = ["Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run causaltab`` (module docstring)."""

    ds: tuple[int, ...] = (10, 20, 50)
    n: int = 200
    n_datasets: int = 20
    int_fracs: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75)
    methods: tuple[str, ...] = ("causaltab", "notears", "direct-lingam", "var-sort-regress",
                                "r2-sort-regress", "gies", "random")
    networks: tuple[str, ...] = ("sachs", "asia", "child", "insurance", "alarm", "Polzer_2012",
                                 "Shrier_2008")
    semantic_seeds: int = 5
    semantic_n: int = 200
    sachs_rows: int = 600
    train_steps: int = 20000
    train_batch: int = 32
    train_n_max: int = 200
    gies_max_d: int = 20
    margin: float = 0.02
    ablation_steps: int = 2000
    ablation_batch: int = 16
    ablation_d: int = 10
    ablation_n: int = 64

    def validate(self) -> None:
        require_at_least(self, ("n_datasets", "semantic_seeds", "train_batch",
                                "ablation_batch"), 2)
        require_at_least(self, ("n", "semantic_n", "sachs_rows", "train_n_max", "ablation_n"),
                         8)
        require_at_least(self, ("train_steps", "ablation_steps"), 0)
        require_positive(self, ("margin",))
        require(len(self.ds) >= 1 and all(d >= 3 for d in self.ds), "ds",
                f"must be a non-empty tuple of ints >= 3; got {self.ds}")
        require(all(0.0 <= f < 1.0 for f in self.int_fracs) and len(self.int_fracs) >= 2,
                "int_fracs", f"must hold >= 2 fractions in [0, 1); got {self.int_fracs}")
        require("causaltab" in self.methods, "methods", "must include 'causaltab'")
        for f in ("train_steps", "ablation_steps"):
            require(getattr(self, f) % 25 == 0, f,
                    f"must be a multiple of 25 (the compiled chunk); got {getattr(self, f)}")
        require(3 <= self.ablation_d <= 10, "ablation_d",
                f"must lie in [3, 10] (the narrow prior's d range); got {self.ablation_d}")


# A first look: d = 10 only, 6 datasets per cell, the Sachs network only, the shipped
# weights; the first four claims tested at this size against the classical baselines
# except NOTEARS (its L-BFGS fits take seconds per dataset on a CPU: about half the old
# quick run), which the full run includes. No prior ablation (two trainings: the full run
# has it).
QUICK = Config(ds=(10,), n=64, n_datasets=6, int_fracs=(0.0, 0.5), semantic_seeds=4,
               semantic_n=64, networks=("sachs",), sachs_rows=64, train_steps=0,
               ablation_steps=0, methods=("causaltab", "direct-lingam", "var-sort-regress",
                                          "r2-sort-regress", "random"))
FULL = Config()
