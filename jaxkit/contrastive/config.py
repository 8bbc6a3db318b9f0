"""Contrastive-discovery configuration: domains, questions, budget and the claim tests.

``jaxkit run contrastive --set budget=8 --set seeds=10``. Each of ``seeds`` seeds draws
``questions`` questions per domain; every method spends at most ``budget`` per question
(experiment costs 0.7 to 3); a question is resolved when the final posterior reaches
``tau``. ``n_samples`` is the number of prior draws of the Monte Carlo evidence
estimator (kinetics, epidemic). The pointwise agents use ``tau`` too, the e-value agent
level ``alpha`` and calibrator exponent ``kappa``; they start each hypothesis at belief
``pointwise_prior`` (0.5: a pointwise agent knows no alternatives; 0.25 = 1/K hands it
the MECE prior). A pointwise candidate is
*high-surprisal* when it moves the focal hypothesis's belief by at least
``surprise_width`` in either direction (0.2: AutoDiscovery's ``surprisal_width``).
Claim margins, fixed before the run: ``resolved_margin`` (the difference in the
fraction of questions resolved correctly that counts as "substantially more", against
every pointwise baseline, Holm-corrected), ``rejection_margin`` (the share of rejections
that counts as "overwhelmingly") and ``many_margin`` (the share that counts as "many").

Misspecified arms (``arms``, :mod:`jaxkit.contrastive.experiment`): ``missing`` (the
true explanation removed from the set), ``nuisance`` (the nuisance parameters under their
prior, ``n_nuisance`` draws, instead of known), ``noisy`` (log-likelihood tables with
N(0, ``table_noise``^2) noise); ``arms=()`` runs the well-specified setting only.

Real data with a known answer (:mod:`jaxkit.contrastive.real`): ``real_lm`` (a model name
for :class:`jaxkit.llm.ChatClient`; ``""``: skip) proposes ``real_k`` explanations per
Sachs protein; ``real_budget`` blocks per question; replies cached in ``lm_cache``
(``""``: ``OUT/llm-cache``), ``lm_offline`` replays only.

Your own hypotheses: ``--set data=FILE.json`` (format: :mod:`jaxkit.contrastive.userfile`)
reports the belief and ranks the next experiments by EIG per cost instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

from .domains import DOMAINS

__all__ = ["ARMS", "Config", "QUICK", "FULL"]

#: the misspecified arms, in report order
ARMS = ("missing", "nuisance", "noisy")


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run contrastive`` (see the module docstring)."""

    domains: tuple[str, ...] = tuple(DOMAINS)
    seeds: int = 10
    questions: int = 40
    budget: float = 6.0
    tau: float = 0.9
    n_samples: int = 512
    alpha: float = 0.1
    kappa: float = 0.5
    surprise_width: float = 0.2
    pointwise_prior: float = 0.5
    resolved_margin: float = 0.1
    rejection_margin: float = 0.75
    many_margin: float = 0.25
    arms: tuple[str, ...] = ARMS
    n_nuisance: int = 16
    table_noise: float = 0.5
    real_lm: str = "smollm2-135m"
    real_k: int = 3
    real_budget: float = 4.0
    lm_cache: str = ""
    lm_offline: bool = False

    data: str = ""  # your own hypotheses file (JSON, :mod:`.userfile`); "": the domains

    def validate(self) -> None:
        require_at_least(self, ("questions", "n_samples"))
        require_at_least(self, ("seeds",), 2)
        require(len(self.domains) >= 1 and all(d in DOMAINS for d in self.domains), "domains",
                f"must be a non-empty tuple of {', '.join(DOMAINS)}; got {self.domains}")
        require(len(set(self.domains)) == len(self.domains), "domains",
                f"must not repeat a domain; got {self.domains}")
        require_positive(self, ("budget",))
        require(all(a in ARMS for a in self.arms) and len(set(self.arms)) == len(self.arms),
                "arms", f"must be distinct names of {', '.join(ARMS)}; got {self.arms}")
        require_at_least(self, ("n_nuisance", "real_k", "real_budget"))
        require(self.real_k <= 10, "real_k", f"must be <= 10; got {self.real_k}")
        require(0 <= self.table_noise < 10, "table_noise",
                f"must lie in [0, 10); got {self.table_noise}")
        require(0 < self.pointwise_prior < 1, "pointwise_prior",
                f"must lie in (0, 1); got {self.pointwise_prior}")
        require(0 < self.surprise_width < 1, "surprise_width",
                f"must lie in (0, 1); got {self.surprise_width}")
        min_cost = min(float(DOMAINS[d].costs.min()) for d in self.domains)
        require(self.budget >= min_cost, "budget",
                f"is below every experiment's cost (cheapest {min_cost:g}); got {self.budget}")
        require(0.5 < self.tau < 1, "tau", f"must lie in (0.5, 1); got {self.tau}")
        require(0 < self.alpha < 1, "alpha", f"must lie in (0, 1); got {self.alpha}")
        require(0 < self.kappa < 1, "kappa", f"must lie in (0, 1); got {self.kappa}")
        for f in ("resolved_margin", "rejection_margin", "many_margin"):
            require(0 <= getattr(self, f) < 1, f, f"must lie in [0, 1); got {getattr(self, f)}")


QUICK = Config(seeds=4, questions=8, n_samples=32, n_nuisance=4, real_lm="")
FULL = Config()
