"""CausalTab configuration: benchmarks, methods, training and the claim tests.

``jaxkit run causaltab --set ds=10,20 --set n_datasets=20``. ``train_steps = 0`` (the
default: QUICK and FULL) scores the shipped weights (``jaxkit/causal_model/weights/``,
trained by :mod:`jaxkit.causaltab.longtrain`, recorded in ``results/causaltab-training/``)
unchanged; ``train_steps > 0`` trains from scratch for that many steps of ``train_batch``
tasks on the broad
prior, ``max_vars = train_d_max`` variables and at most ``train_n_max`` rows per task,
starting from the narrow prior through a curriculum when ``train_curriculum``,
checkpointed under the run folder so a killed run resumes. A benchmark with more
variables than the model's ``max_vars`` is scored over covering subsets of ``max_vars``
variables (the cell says ``chunked``). Each synthetic benchmark cell has ``n_datasets``
datasets of ``n`` rows at every ``d`` in ``ds``; ``int_fracs`` are the interventional
fractions of the mixed-interventional sweep; ``semantic_seeds`` datasets per expert
network; GIES and causal-learn's GES run up to ``gies_max_d`` variables (PC at every
d). The paper claims' margins, fixed before the run (AUROC units,
:mod:`jaxkit.causaltab.report`): ``beat_margin`` (CausalTab minus each baseline),
``int_margin`` (interventional minus observational) and ``ablation_margin`` (broad minus
narrow prior).

A training smoke run (``smoke_steps > 0``; QUICK 50): a tiny model (8 features, one
layer, d <= 6, n <= 16, 4 tasks a step) trained by :mod:`jaxkit.causaltab.longtrain`'s
curriculum for ``smoke_steps`` steps, its loss and validation AUROC in the report (it
shows the training path runs; the scored model stays the main one).

Per-axis out-of-distribution cells (``ood_axes``; none in QUICK): the in-distribution
prior with only its graph families, mechanisms or noise laws swapped for the held-out
ones, at ``ood_axes_d`` variables, observational and at the largest interventional
fraction; extension rows of the claims.

The LLM audit: the section ``audit`` (:class:`AuditSettings`; ``--set audit.templates=2``,
``--set audit.model=`` skips it). The prior ablation: the section ``ablation``
(:class:`AblationSettings`; ``ablation.steps > 0``, off in QUICK). When the main training
has the ablation's broad arm's recipe (``train_steps``, ``train_batch``, ``train_n_max``
equal to ``ablation.steps``, ``ablation.batch``, ``ablation.n``; ``train_d_max = 20``;
``train_curriculum`` off) the broad arm *is* the main model, trained once
(:func:`jaxkit.causaltab.recipes.train_ablation`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least

__all__ = ["AuditSettings", "AblationSettings", "Config", "QUICK", "FULL", "OOD_AXES"]

#: The axes held out one at a time in the per-axis out-of-distribution cells.
OOD_AXES = ("graph", "mechanism", "noise")


@dataclass(frozen=True)
class AuditSettings(PipelineConfig):
    """The LLM audit, the section ``audit`` of :class:`Config` (``model``; ``""`` skips
    it): the local model (:func:`jaxkit.lm.load`) asked of every ordered pair of each
    network in ``networks`` whether one directly causes the other, in ``templates``
    paraphrases, scored against the expert graph (:mod:`jaxkit.causaltab.audit`); the
    audit is worth something when its AUROC exceeds 0.5 by ``margin`` over networks x
    templates, and its shuffled-name control must not."""

    model: str = "smollm2-135m"
    networks: tuple[str, ...] = ("sachs", "asia", "child", "insurance", "alarm",
                                 "Polzer_2012", "Shrier_2008")
    templates: int = 3
    margin: float = 0.05

    def validate(self) -> None:
        from .semantic import BIF_NETWORKS, DAGITTY_NETWORKS

        known = BIF_NETWORKS + DAGITTY_NETWORKS
        bad = [n for n in self.networks if n not in known]
        require(not bad, "networks", f"unknown network(s) {bad}; choose from {known}")
        require(1 <= self.templates <= 3, "templates",
                f"must be 1, 2 or 3 (the prompt templates); got {self.templates}")
        require_at_least(self, ("margin",), 0)


@dataclass(frozen=True)
class AblationSettings(PipelineConfig):
    """The prior ablation, the section ``ablation`` of :class:`Config` (``steps > 0``; off
    in QUICK): two models of the shipped architecture (``max_vars = 20``) trained from the
    main training's key (the same initial parameters and step keys) for ``steps`` steps of
    ``batch`` tasks of at most ``n`` rows, no curriculum, one on the broad prior and one on
    the narrow prior, then scored on the same ``datasets`` datasets per cell of ``d``
    variables (at most 10, inside the narrow prior's range) and ``n`` rows, in and out of
    distribution, at the smallest and the largest of ``int_fracs``."""

    steps: int = 3600
    batch: int = 16
    d: int = 10
    n: int = 64
    datasets: int = 20

    def validate(self) -> None:
        require_at_least(self, ("batch", "datasets"), 2)
        require_at_least(self, ("n",), 8)
        require_at_least(self, ("steps",), 0)
        require(self.steps % 25 == 0, "steps",
                f"must be a multiple of 25 (the compiled chunk); got {self.steps}")
        require(3 <= self.d <= 10, "d",
                f"must lie in [3, 10] (the narrow prior's d range); got {self.d}")


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run causaltab`` (module docstring)."""

    ds: tuple[int, ...] = (10, 20, 50)
    n: int = 200
    n_datasets: int = 10
    int_fracs: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75)
    methods: tuple[str, ...] = ("causaltab", "notears", "direct-lingam", "ica-lingam",
                                "var-sort-regress", "r2-sort-regress", "gies", "pc", "ges",
                                "random")
    networks: tuple[str, ...] = ("sachs", "asia", "child", "insurance", "alarm", "Polzer_2012",
                                 "Shrier_2008")
    semantic_seeds: int = 5
    semantic_n: int = 200
    sachs_rows: int = 600
    train_steps: int = 0
    train_batch: int = 16
    train_n_max: int = 64
    train_d_max: int = 20
    train_curriculum: bool = False
    gies_max_d: int = 20
    ood_axes: tuple[str, ...] = OOD_AXES
    ood_axes_d: int = 10
    beat_margin: float = 0.0
    int_margin: float = 0.0
    ablation_margin: float = 0.0
    smoke_steps: int = 0
    audit: AuditSettings = AuditSettings()
    ablation: AblationSettings = AblationSettings()

    def validate(self) -> None:
        require_at_least(self, ("n_datasets", "semantic_seeds", "train_batch"), 2)
        require_at_least(self, ("n", "semantic_n", "sachs_rows", "train_n_max"), 8)
        require_at_least(self, ("train_steps", "smoke_steps"), 0)
        require_at_least(self, ("train_d_max",), 3)
        require_at_least(self, ("beat_margin", "int_margin", "ablation_margin"), 0)
        require(len(self.ds) >= 1 and all(d >= 3 for d in self.ds), "ds",
                f"must be a non-empty tuple of ints >= 3; got {self.ds}")
        require(all(0.0 <= f < 1.0 for f in self.int_fracs) and len(self.int_fracs) >= 2,
                "int_fracs", f"must hold >= 2 fractions in [0, 1); got {self.int_fracs}")
        require("causaltab" in self.methods, "methods", "must include 'causaltab'")
        require(all(a in OOD_AXES for a in self.ood_axes), "ood_axes",
                f"must be a subset of {OOD_AXES}; got {self.ood_axes}")
        require_at_least(self, ("ood_axes_d",), 3)
        for f in ("train_steps", "smoke_steps"):
            require(getattr(self, f) % 25 == 0, f,
                    f"must be a multiple of 25 (the compiled chunk); got {getattr(self, f)}")
        from .semantic import BIF_NETWORKS, DAGITTY_NETWORKS

        known = BIF_NETWORKS + DAGITTY_NETWORKS
        bad = [n for n in self.networks if n not in known]
        require(not bad, "networks", f"unknown network(s) {bad}; choose from {known}")


# A first look: d = 10 only, 6 datasets per cell, the Sachs network only, the shipped
# weights; the first four claims tested at this size against the classical baselines
# except NOTEARS (its L-BFGS fits take seconds per dataset on a CPU: about half the old
# quick run), which the full run includes. No prior ablation (two trainings: the full run
# has it).
QUICK = Config(ds=(10,), n=64, n_datasets=6, int_fracs=(0.0, 0.5), semantic_seeds=4,
               semantic_n=64, networks=("sachs",), sachs_rows=64, train_steps=0, ood_axes=(),
               ablation=AblationSettings(steps=0), smoke_steps=50,
               audit=AuditSettings(networks=("asia",), templates=1),
               methods=("causaltab", "direct-lingam", "ica-lingam", "var-sort-regress",
                        "r2-sort-regress",
                        "pc", "ges", "random"))
# The full run scores the shipped weights (train_steps = 0; dim 64, 143k parameters,
# 16,000 steps of the long training in two segments, results/causaltab-training/: the
# training is recorded there, the full run evaluates). The prior ablation trains its two
# arms here (the first shipped recipe: dim 32, 3600 steps x 16 tasks, d <= 20, n <= 64,
# no curriculum, one on the broad and one on the narrow prior; `--set train_steps=3600`
# makes the main model that recipe again, and then its broad arm is the main training,
# trained once). d = 50 is scored over covering subsets of 20 variables; 10 datasets per
# synthetic cell (24 cells: 240 per method), 20 per ablation cell. Estimate, CPU seconds
# measured on this machine (time.process_time around the compiled call, compilation
# apart): the two ablation arms 0.48 s a step x 3600 steps x 2 = 3500 s; synthetic grid
# 8 cells x 10 datasets x (1.4 s at d=10, 8.2 s at d=20 (GIES 6.6 s), 4.8 s at d=50
# (NOTEARS 3.5 s, CausalTab over 10 subsets 1.0 s)) + compilations = 1250 s; semantic
# environments about 470 s (7 networks x 2 fractions x 5 seeds; NOTEARS and GIES on the
# dagitty networks ~10 s each), real Sachs 20 s, ablation scoring about 15 s; PC and GES
# (causal-learn) on every dataset and the 6 per-axis out-of-distribution cells at d = 10
# about 900 s: about 6200 s of CPU in all (the record of the first recipe, which also
# trained two models, took 3,238 s of wall on 2 cores). The former FULL (32 tasks a step at
# d <= 50, n <= 200: 19.9 s CPU a step, 20000 steps = 110 h) could not run here.
FULL = Config()
