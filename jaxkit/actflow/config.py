"""ActFlow settings: the per-domain loop settings and the pipeline configuration.

:class:`ActFlowConfig` holds what one domain's run needs (model, pre-training, rounds,
exploration, evaluation); it is hashable, so the jitted functions of
:mod:`jaxkit.actflow.loop` can be built once per configuration. :class:`Config` is the
configuration of ``jaxkit run actflow``: the domains, the loop settings shared by every
domain, the paper claims' margins (``expansion_margin``: ActFlow's held-out coverage above
the pre-trained model's; ``baseline_margin``: above the better synthetic pre-training
baseline's; shares of the held-out valid set, fixed before the run;
:mod:`jaxkit.actflow.report`), and the section ``peptide`` (:class:`PeptideOverrides`)
whose fields replace a shared setting for the peptide domain (``none``: the shared
value). ``jaxkit run actflow --set rounds=2`` sets the rounds of the continuous domains;
the peptide domain runs ``peptide.rounds`` (QUICK: 2, FULL: 5) unless that is set to none
(``--set rounds=2 --set peptide.rounds=none``: 2 everywhere).
The discrete domains (``peptides-discrete``, ``molecules``, ``proteins``, ``user``) run
:mod:`jaxkit.actflow.discrete` with the section ``dfm``
(:class:`~jaxkit.actflow.discrete.DiscreteSettings`; ``--set dfm.rounds=3``;
:meth:`Config.discrete`);
``n_seeds`` training seeds per domain (FULL: 5) give the intervals and the claim tests;
``user_data`` / ``user_verifier`` / ``user_column`` / ``user_novelty`` define the
``user`` domain (``user_novelty_share``, when set, replaces ``user_novelty`` by that share
of the padded length) (:mod:`jaxkit.actflow.user`). The ``druglike`` domain
(:mod:`jaxkit.actflow.druglike`, MOSES; skipped with a note when the molsets wheel is
not installed) pre-trains on ``druglike_n_data`` molecules with logP <=
``druglike_max_logp`` (the split, fixed here before the run) and measures coverage of
``druglike_n_ref`` held-out MOSES test molecules above it (QUICK: 300 / 64), with the
``druglike_arch`` denoiser (``mlp`` or ``transformer``). QUICK runs
rings and the discrete peptides at tiny size (the 40 s budget); molecules, druglike,
proteins, torus, sphere and the relaxed peptides (the ablation of the discrete arm) run
in FULL (``--quick --set domains=druglike`` runs one at QUICK size).
The peptide domains are checked by the antimicrobial-peptide-like verifier with the
windows of the section ``amp`` (:class:`AMPSettings`) and the proteins by the
soluble-protein-like one with those of ``soluble`` (:class:`SolubleSettings`)
(:mod:`jaxkit.actflow.peptide_verifier`; net charges from the ``pka_set`` pKa values);
the held-out regions are net charge at pH 7 above
``peptide_max_charge`` and hydrophobic moment above ``protein_max_moment``; a sequence
is novel beyond a Hamming radius of ``seq_novelty_share`` of its padded length.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from jaxkit.config import PipelineConfig, require, require_at_least, require_distinct
from jaxkit.kernels import flow

from .discrete import DiscreteSettings
from .peptide_verifier import AMPWindows, SolubleWindows

_AMP, _SOLUBLE = AMPWindows(), SolubleWindows()  # the verifiers' defaults, one source

__all__ = ["ActFlowConfig", "Config", "QUICK", "FULL", "DOMAINS", "DISCRETE", "PEPTIDE_FIELDS",
           "PeptideOverrides", "AMPSettings", "SolubleSettings", "DiscreteSettings"]

DOMAINS = ("rings", "torus", "sphere", "peptides", "peptides-discrete", "molecules",
           "druglike", "proteins", "user")
#: the discrete (token) domains, run by :mod:`jaxkit.actflow.discrete`
DISCRETE = ("peptides-discrete", "molecules", "druglike", "proteins", "user")
#: the loop settings the section ``peptide`` can replace for the peptide domain
PEPTIDE_FIELDS = ("hidden", "depth", "n_data", "pretrain_steps", "batch", "rounds", "budget",
                  "adapt_steps", "n_eval", "sample_steps", "steer_steps")
_POSITIVE = ("hidden", "depth", "n_data", "batch", "rounds", "budget", "sample_steps",
             "n_eval", "pretrain_steps", "adapt_steps")


@dataclass(frozen=True)
class _LoopSettings(PipelineConfig):
    """The loop settings: the fields of :class:`ActFlowConfig`, shared by :class:`Config`
    (which gives some of them other defaults)."""

    hidden: int = 128
    depth: int = 3
    lr: float = 2e-3
    n_data: int = 1024
    pretrain_steps: int = 2000
    batch: int = 256
    rounds: int = 5
    budget: int = 512
    adapt_steps: int = 300
    replay: float = 0.5
    sample_steps: int = 16
    ode: str = "midpoint"
    temperature: float = 2.0
    perturb: float = 0.5
    sigma: float = 0.5
    steer_steps: int = 1
    steer_lr: float = 0.2
    n_eval: int = 1024

    def validate(self) -> None:
        require_at_least(self, _POSITIVE)
        require(self.steer_steps >= 0, "steer_steps", f"must be >= 0; got {self.steer_steps}")
        require(self.lr > 0, "lr", f"must be > 0; got {self.lr}")
        for f in ("replay", "perturb"):
            v = getattr(self, f)
            require(0.0 <= v <= 1.0, f, f"must lie in [0, 1]; got {v}")
        require(self.ode in flow.METHODS, "ode",
                f"must be one of {flow.METHODS}; got {self.ode!r}")


@dataclass(frozen=True)
class ActFlowConfig(_LoopSettings):
    """Model, pre-training, loop and exploration settings of one domain (hashable).

    Model: ``hidden`` x ``depth`` MLP, Adam ``lr``. Pre-training: ``n_data`` points,
    ``pretrain_steps`` steps of minibatch ``batch`` (rounded up to whole chunks of
    ``adapt_steps``). Loop: ``rounds`` rounds of ``budget`` samples and ``adapt_steps``
    Adam steps on minibatches with a share ``replay`` of kept samples; ``sample_steps``
    steps of the ``ode`` solver. ActFlow exploration: a share ``perturb`` of the budget
    from ODE-inverted anchors plus ``sigma`` noise, the rest from ``temperature`` x
    N(0, I); ``steer_steps`` gradient steps of length ``steer_lr`` toward novelty.
    Evaluation: ``n_eval`` samples."""


@dataclass(frozen=True)
class PeptideOverrides(PipelineConfig):
    """The section ``peptide`` of :class:`Config`: loop settings (:class:`ActFlowConfig`'s
    fields of the same names) that replace the shared ones for the peptide domain;
    ``none`` keeps the shared value (``--set peptide.rounds=none``)."""

    hidden: int | None = None
    depth: int | None = None
    n_data: int | None = None
    pretrain_steps: int | None = None
    batch: int | None = None
    rounds: int | None = None
    budget: int | None = None
    adapt_steps: int | None = None
    n_eval: int | None = None
    sample_steps: int | None = None
    steer_steps: int | None = None

    def validate(self) -> None:
        for f in PEPTIDE_FIELDS:
            v, lo = getattr(self, f), 0 if f == "steer_steps" else 1
            require(v is None or v >= lo, f, f"must be none or a "
                    f"{'non-negative' if lo == 0 else 'positive'} integer; got {v}")


def _window(s: PipelineConfig, f: str, lo_min: float | None = None) -> None:
    lo, hi = getattr(s, f)
    require(lo <= hi and (lo_min is None or lo >= lo_min), f,
            f"must be a window (low, high) with {'' if lo_min is None else f'{lo_min} <= '}"
            f"low <= high; got {lo, hi}")


def _check_windows(s: PipelineConfig, shares: tuple[str, ...]) -> None:
    """A verifier section's checks: ``length`` a window of at least 1 residue, ``charge``
    and ``gravy`` windows, each of ``shares`` in [0, 1]."""
    _window(s, "length", 1)
    for f in ("charge", "gravy"):
        _window(s, f)
    for f in shares:
        v = getattr(s, f)
        require(0.0 <= v <= 1.0, f, f"must lie in [0, 1]; got {v}")


@dataclass(frozen=True)
class AMPSettings(PipelineConfig):
    """The section ``amp`` of :class:`Config`: the antimicrobial-peptide-like verifier's
    windows (:class:`jaxkit.actflow.peptide_verifier.AMPWindows`; inclusive): ``length``
    in residues, net ``charge`` at pH 7, hydrophobic moment at least ``min_moment``,
    ``gravy``, instability index at most ``max_instability``, aggregation share at most
    ``max_aggregation``."""

    length: tuple[int, int] = _AMP.length
    charge: tuple[float, float] = _AMP.charge
    min_moment: float = _AMP.min_moment
    gravy: tuple[float, float] = _AMP.gravy
    max_instability: float = _AMP.max_instability
    max_aggregation: float = _AMP.max_aggregation

    def validate(self) -> None:
        _check_windows(self, ("max_aggregation",))


@dataclass(frozen=True)
class SolubleSettings(PipelineConfig):
    """The section ``soluble`` of :class:`Config`: the soluble-protein-like verifier's
    windows (:class:`jaxkit.actflow.peptide_verifier.SolubleWindows`): ``length`` in
    residues, instability index below ``max_instability``, ``gravy``, net ``charge`` at
    pH 7, aggregation share at most ``max_aggregation``, no residue above a share
    ``max_share``."""

    length: tuple[int, int] = _SOLUBLE.length
    max_instability: float = _SOLUBLE.max_instability
    gravy: tuple[float, float] = _SOLUBLE.gravy
    charge: tuple[float, float] = _SOLUBLE.charge
    max_aggregation: float = _SOLUBLE.max_aggregation
    max_share: float = _SOLUBLE.max_share

    def validate(self) -> None:
        _check_windows(self, ("max_aggregation", "max_share"))


@dataclass(frozen=True)
class Config(_LoopSettings):
    """``jaxkit run actflow``: domains, shared loop settings (see
    :class:`ActFlowConfig`; ``pretrain_steps``, ``rounds``, ``budget`` and ``n_eval``
    with other defaults), peptide overrides, and the claim tests' ``n_draws``
    independent evaluation draws of every final model."""

    pretrain_steps: int = 4000
    rounds: int = 6
    budget: int = 256
    n_eval: int = 768
    domains: tuple[Literal["rings", "torus", "sphere", "peptides", "peptides-discrete",
                           "molecules", "druglike", "proteins", "user"], ...] = DOMAINS[:-1]
    peptide: PeptideOverrides = PeptideOverrides()
    peptide_max_charge: float = 3.0
    n_draws: int = 8
    n_seeds: int = 1
    expansion_margin: float = 0.05
    baseline_margin: float = 0.02
    dfm: DiscreteSettings = DiscreteSettings()
    molecule_max_mw: float = 160.0
    druglike_n_data: int = 4000
    druglike_n_ref: int = 512
    druglike_max_len: int = 40
    druglike_max_logp: float = 2.5
    druglike_novelty: float = 0.6
    druglike_arch: Literal["mlp", "transformer"] = "mlp"
    protein_max_moment: float = 0.15
    seq_novelty_share: float = 0.4
    pka_set: Literal["EMBOSS", "Lehninger"] = "EMBOSS"
    amp: AMPSettings = AMPSettings()
    soluble: SolubleSettings = SolubleSettings()
    user_data: str = ""
    user_verifier: str = ""
    user_column: str = "sequence"
    user_novelty: int = 4
    user_novelty_share: float | None = None

    def validate(self) -> None:
        require_distinct("domains", self.domains, "domain")
        require(self.n_seeds >= 1, "n_seeds", f"must be >= 1; got {self.n_seeds}")
        if "user" in self.domains:
            require(bool(self.user_data), "user_data",
                    "must name your data file when domains include 'user'")
            require(bool(self.user_verifier), "user_verifier",
                    "must name your verifier as 'module:function' when domains include "
                    "'user'")
        for f in ("druglike_n_data", "druglike_n_ref", "druglike_max_len"):
            require(getattr(self, f) >= 6, f, f"must be >= 6; got {getattr(self, f)}")
        require(0.0 < self.druglike_novelty < 1.0, "druglike_novelty",
                f"must lie in (0, 1) (a Tanimoto distance); got {self.druglike_novelty}")
        require(self.user_novelty_share is None or 0.0 < self.user_novelty_share < 1.0,
                "user_novelty_share", f"must be none or lie in (0, 1) (a share of the padded "
                                      f"length); got {self.user_novelty_share}")
        require(0.0 < self.seq_novelty_share < 1.0, "seq_novelty_share",
                f"must lie in (0, 1) (a share of the padded length); got "
                f"{self.seq_novelty_share}")
        for f in ("expansion_margin", "baseline_margin"):
            v = getattr(self, f)
            require(0.0 <= v < 1.0, f, f"must lie in [0, 1); got {v}")
        require(self.n_draws >= 2, "n_draws", f"must be >= 2 (a t interval); got "
                                              f"{self.n_draws}")
        super().validate()

    def loop(self, domain: str) -> ActFlowConfig:
        """The loop settings of ``domain`` (the shared ones, with the section ``peptide``'s
        overrides for the peptide domain)."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(_LoopSettings)}
        if domain == "peptides":
            for f in PEPTIDE_FIELDS:
                v = getattr(self.peptide, f)
                if v is not None:
                    shared[f] = v
        return ActFlowConfig(**shared)

    def amp_windows(self):
        """The antimicrobial-peptide-like verifier's windows (the section ``amp`` and
        ``pka_set``): :class:`jaxkit.actflow.peptide_verifier.AMPWindows`."""
        return AMPWindows(**_fields(self.amp), pka=self.pka_set)

    def soluble_windows(self):
        """The soluble-protein-like verifier's windows (the section ``soluble`` and
        ``pka_set``): :class:`jaxkit.actflow.peptide_verifier.SolubleWindows`."""
        return SolubleWindows(**_fields(self.soluble), pka=self.pka_set)

    def discrete(self, domain: str | None = None):
        """The :class:`~jaxkit.actflow.discrete.DiscreteSettings` of the discrete domains:
        the section ``dfm`` (its own ``lr``), whose denoiser ``arch`` is replaced by
        ``druglike_arch`` for ``domain="druglike"``."""
        if domain == "druglike":
            return dataclasses.replace(self.dfm, arch=self.druglike_arch)
        return self.dfm


def _fields(section: PipelineConfig) -> dict:
    return {f: getattr(section, f) for f in section.field_names()}


QUICK = Config(domains=("rings", "peptides-discrete"), hidden=64, depth=3, n_data=512,
               pretrain_steps=1000, batch=128, rounds=3, budget=128, adapt_steps=100,
               n_eval=128, sample_steps=8, steer_steps=1,
               peptide=PeptideOverrides(hidden=128, depth=2, pretrain_steps=600, batch=64,
                                        rounds=2, budget=64, adapt_steps=50, n_eval=128,
                                        sample_steps=8, steer_steps=0),
               dfm=DiscreteSettings(hidden=128, pretrain_steps=300, batch=64, rounds=2,
                                    budget=64, adapt_steps=50, n_eval=128, sample_steps=8),
               n_draws=4, druglike_n_data=300, druglike_n_ref=64)
FULL = Config(n_seeds=5, peptide=PeptideOverrides(hidden=256, pretrain_steps=3000, batch=128,
                                                  rounds=5, adapt_steps=200, n_eval=512,
                                                  sample_steps=12, steer_steps=0))
