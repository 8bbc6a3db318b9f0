"""CruxBench configuration.

``jaxkit run cruxbench --set n_targets=336 --set n_proposers=8``. The simulated
benchmark has ``n_targets`` latent-Gaussian targets with ``n_factors`` factors
(``explained`` of the latent variance, log-normal loading weights of spread ``loading_spread``,
thresholds of scale ``threshold_scale``), ``n_proposers`` simulated models each asking
``n_questions`` questions per target (knowledge noise log-uniform in
``[noise_min, noise_max]``, vagueness up to ``vagueness_max``, threshold spread up to
``spread_max``), one market of ``n_steps`` steps per question, and an independent
quality measure on ``n_quality_targets`` held-out targets. Prices are clipped to
``[clip_lo, clip_hi]``; the realised update spans ``window`` time units after the
announcement. Statistics: ``n_boot`` nested-bootstrap resamples, ``n_perm``
permutations (exact for <= 8 proposers), the paper's ``r_paper`` with equivalence
margin ``r_margin``. ``data``: a CruxBench JSON Lines file of real markets scored by the
same code (``""``: none).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

from .simulate import SimSettings

__all__ = ["Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run cruxbench`` (see the module docstring)."""

    n_targets: int = 336
    n_proposers: int = 8
    n_questions: int = 3
    n_factors: int = 8
    n_steps: int = 64
    n_quality_targets: int = 2000
    explained: float = 0.8
    loading_spread: float = 1.0
    threshold_scale: float = 0.8
    noise_min: float = 0.05
    noise_max: float = 1.5
    vagueness_max: float = 1.0
    spread_max: float = 1.5
    clip_lo: float = 0.01
    clip_hi: float = 0.99
    window: float = 0.0
    n_boot: int = 5000
    n_perm: int = 10000
    r_paper: float = 0.87
    r_margin: float = 0.15
    data: str = ""

    def validate(self) -> None:
        require_at_least(self, ("n_targets", "n_questions", "n_factors", "n_boot", "n_perm",
                                "n_quality_targets"))
        require_at_least(self, ("n_targets",), 4)
        require_at_least(self, ("n_proposers", "n_steps"), 2)
        require(self.n_questions <= self.n_factors, "n_questions",
                f"must be <= n_factors ({self.n_factors}); got {self.n_questions}")
        require(0 < self.explained < 1, "explained", f"must be in (0, 1); got {self.explained}")
        require_positive(self, ("loading_spread", "threshold_scale", "noise_min", "r_margin"))
        require(self.noise_max >= self.noise_min, "noise_max",
                f"must be >= noise_min ({self.noise_min}); got {self.noise_max}")
        require_at_least(self, ("vagueness_max", "spread_max", "window"), 0)
        require(0 < self.clip_lo < 0.5 < self.clip_hi < 1, "clip_lo",
                f"and clip_hi must satisfy 0 < clip_lo < 0.5 < clip_hi < 1; got "
                f"{self.clip_lo}, {self.clip_hi}")
        require(-1 <= self.r_paper <= 1, "r_paper", f"must be in [-1, 1]; got {self.r_paper}")

    def sim_settings(self) -> SimSettings:
        """The simulator's (hashable) settings."""
        return SimSettings(self.n_targets, self.n_proposers, self.n_questions, self.n_factors,
                           self.n_steps, self.n_quality_targets, self.explained,
                           self.loading_spread, self.threshold_scale, self.noise_min,
                           self.noise_max, self.vagueness_max, self.spread_max)


# QUICK asks 64 simulated proposers about 128 targets: across 8 proposers (the paper's
# number, and FULL's) the simulator's VOI-quality correlation is itself a draw of 8
# trait vectors (r from -0.40 to 0.73 over 5 simulator seeds, 64 targets), so no size
# of the target set decides claim 1. Smallest sizes that did, over 5 simulator seeds
# (claim 1 / claim 3 "yes"): 64 x 32 proposers 2/5 / 1/5, 64 x 48 3/5 / 2/5, 64 x 64
# 5/5 / 2/5, 96 x 64 5/5 / 5/5, 128 x 64 5/5 / 5/5 (pipeline seeds 0, 1: claim 3 yes,
# not shown); r(VOI, quality) is 0.26-0.54, so claim 2 (r = 0.87) is decided "no".
# About 16 s CPU under load (2026-12-01).
QUICK = Config(n_targets=128, n_proposers=64, n_steps=24, n_quality_targets=256, n_boot=1000,
               n_perm=2000)
FULL = Config()
