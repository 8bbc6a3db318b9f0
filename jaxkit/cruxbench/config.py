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
announcement. The separate forecasting agent that measures usefulness sees the
loadings with noise ``forecaster_noise`` and never reads the proposers' probabilities.

How much the proposers' quality shares with VOI is the simulator's choice:
``quality_link`` 1 (quality is forecasting skill with the same knowledge trait that steers
the questions), 0 (an independent draw of that trait: no relation by construction);
``link_sweep`` reruns the seeds' VOI-quality correlation at other links, so the report
shows how much of the r is the simulator's assumption.

Replicates: ``n_sim_seeds`` simulated benchmarks (the unit a user would redo), each
reduced to one number per claim; the verdicts come from the seeds.

The claims' nulls and margins, fixed before the run (never from the measured data):
``r_high``, the correlation "correlates highly" must exceed (the seeds' mean Fisher z
against ``atanh(r_high)``); ``usefulness_margin``, the held-out Brier improvement of the
top-VOI half of the proposers over the bottom half that counts as "predicts
usefulness"; the paper's ``r_paper`` with equivalence margin ``r_margin`` (an extension
row). Seed 0's detail: ``n_boot`` nested-bootstrap resamples, ``n_perm`` permutations
(exact for <= 8 proposers). ``data``: a CruxBench JSON Lines file of real markets scored
by the same code (``""``: none).

Text (:mod:`jaxkit.cruxbench.text`): the section ``lm`` (:class:`TextSettings`;
``--set lm.offline=true``, ``--set lm.model=`` skips the block).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

from .simulate import SimSettings

__all__ = ["TextSettings", "Config", "QUICK", "FULL"]



@dataclass(frozen=True)
class TextSettings(PipelineConfig):
    """The text block (:mod:`jaxkit.cruxbench.text`), the section ``lm`` of
    :class:`Config`: the language model ``model`` (``""``: skip the block) writes
    ``questions`` subquestions for each of the first ``targets`` plain-language targets at
    each of ``temperatures`` (``samples`` choices per call above 0, at most ``max_tokens``
    tokens a reply), its replies cached in ``cache`` (``""``: ``OUT/llm-cache``) and
    replayed from there; ``offline``: replay only (a missing reply is reported, nothing is
    generated)."""

    model: str = "smollm2-135m"
    targets: int = 12
    questions: int = 3
    temperatures: tuple[float, ...] = (0.0, 0.7, 1.0)
    samples: int = 8
    max_tokens: int = 160
    cache: str = ""
    offline: bool = False

    def validate(self) -> None:
        from .text import TARGETS

        require(1 <= self.targets <= len(TARGETS), "targets",
                f"must be in [1, {len(TARGETS)}]; got {self.targets}")
        require_at_least(self, ("questions", "samples", "max_tokens"))
        require(len(self.temperatures) >= 1 and all(0 <= t <= 2 for t in self.temperatures),
                "temperatures",
                f"must be a non-empty tuple of values in [0, 2]; got {self.temperatures}")
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
    forecaster_noise: float = 0.3
    quality_link: float = 1.0
    link_sweep: tuple[float, ...] = (0.0, 0.5)
    n_sim_seeds: int = 20
    r_high: float = 0.5
    usefulness_margin: float = 0.0
    n_boot: int = 5000
    n_perm: int = 10000
    r_paper: float = 0.87
    r_margin: float = 0.15
    data: str = ""
    lm: TextSettings = TextSettings()

    def validate(self) -> None:
        require_at_least(self, ("n_targets", "n_questions", "n_factors", "n_boot", "n_perm",
                                "n_quality_targets"))
        require_at_least(self, ("n_targets",), 4)
        require_at_least(self, ("n_proposers", "n_steps", "n_sim_seeds"), 2)
        require(self.n_questions <= self.n_factors, "n_questions",
                f"must be <= n_factors ({self.n_factors}); got {self.n_questions}")
        require(0 < self.explained < 1, "explained", f"must be in (0, 1); got {self.explained}")
        require_positive(self, ("loading_spread", "threshold_scale", "noise_min", "r_margin"))
        require(self.noise_max >= self.noise_min, "noise_max",
                f"must be >= noise_min ({self.noise_min}); got {self.noise_max}")
        require_at_least(self, ("vagueness_max", "spread_max", "window", "forecaster_noise",
                                "usefulness_margin"), 0)
        require(-1 < self.r_high < 1, "r_high", f"must be in (-1, 1); got {self.r_high}")
        require(0 < self.clip_lo < 0.5 < self.clip_hi < 1, "clip_lo",
                f"and clip_hi must satisfy 0 < clip_lo < 0.5 < clip_hi < 1; got "
                f"{self.clip_lo}, {self.clip_hi}")
        require(-1 <= self.r_paper <= 1, "r_paper", f"must be in [-1, 1]; got {self.r_paper}")
        for name, v in [("quality_link", self.quality_link),
                        *(("link_sweep", x) for x in self.link_sweep)]:
            require(0 <= v <= 1, name, f"must lie in [0, 1]; got {v}")

    def sim_settings(self) -> SimSettings:
        """The simulator's (hashable) settings."""
        return SimSettings(self.n_targets, self.n_proposers, self.n_questions, self.n_factors,
                           self.n_steps, self.n_quality_targets, self.explained,
                           self.loading_spread, self.threshold_scale, self.noise_min,
                           self.noise_max, self.vagueness_max, self.spread_max,
                           self.forecaster_noise, self.quality_link)


# QUICK: the paper's 8 proposers, 64 targets, 20 simulator seeds (FULL: 336 targets x 8
# proposers x 20 seeds). The verdicts come from the seeds (one r per seed over 8
# proposers: seed 0 of the old single-draw FULL gave r = 0.80, seeds 1-5 0.26-0.65), so a
# quick run decides what a user redoing it would see; a seed costs about 0.2 s after
# compilation, and with 8 seeds both paper verdicts flipped across base seeds 0-2
# (`jaxkit claims stability cruxbench`).
QUICK = Config(n_targets=64, n_proposers=8, n_steps=24, n_quality_targets=256,
               n_sim_seeds=20, n_boot=1000, n_perm=2000,
               lm=TextSettings(targets=3, temperatures=(0.7,), samples=1), link_sweep=(0.0,))
FULL = Config()
