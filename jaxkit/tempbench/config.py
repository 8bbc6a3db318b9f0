"""TempBench configuration: the tasks, the dictionaries, their training and the claim tests.

``jaxkit run tempbench --set rhos=0,0.5,0.9 --set seeds=5``. Every method gets
``n_latents`` latents per dictionary, ``steps`` Adam steps of ``batch_size`` windows at
learning rate ``lr``; the acausal crosscoder's L1 coefficient starts at ``acausal_lam``
and is steered with gain ``acausal_eta`` towards the matched L0. ``log_every`` is the
chunk of steps run in one compiled call (``steps`` must be a multiple of it) and
``checkpoint_every`` the chunks between checkpoints of a resumable training.
``equivalence_margin`` is the margin of the "matches" claims (AUC units).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

__all__ = ["Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run tempbench`` (see the module docstring).

    Tasks: ``d``-dimensional activations, sequences of ``length`` tokens, ``n_train`` /
    ``n_test`` sequences per seed; Markov features (``n_features`` directions, firing
    rate ``pi``, persistences ``rhos``, windows ``windows``, per-token budgets ``ks``),
    HMM denoising (``n_states`` states, noise ``sigma``, windows ``hmm_windows``),
    ordered chains (``n_chains`` chains of 3, windows ``chain_windows``); ``seeds``
    independent data sets and trainings per setting."""

    rhos: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 0.9)
    windows: tuple[int, ...] = (2, 5)
    ks: tuple[int, ...] = (1, 2)
    seeds: int = 3
    steps: int = 1200
    batch_size: int = 128
    lr: float = 3e-3
    acausal_lam: float = 1e-3
    acausal_eta: float = 0.05
    n_latents: int = 64
    d: int = 16
    n_features: int = 32
    pi: float = 0.05
    length: int = 64
    n_train: int = 64
    n_test: int = 16
    n_states: int = 8
    sigma: float = 0.8
    n_chains: int = 8
    hmm_windows: tuple[int, ...] = (2, 5)
    chain_windows: tuple[int, ...] = (3, 5)
    log_every: int = 100
    checkpoint_every: int = 2
    equivalence_margin: float = 0.05

    def validate(self) -> None:
        require_at_least(self, ("seeds", "steps", "batch_size", "n_latents", "d", "n_features",
                                "length", "n_train", "n_test", "n_chains", "log_every",
                                "checkpoint_every"))
        require_at_least(self, ("n_states",), 2)
        require(self.n_states <= self.d, "n_states",
                f"must be <= d ({self.d}) (orthonormal state directions); got {self.n_states}")
        require(self.steps % self.log_every == 0, "steps",
                f"must be a multiple of log_every ({self.log_every}); got {self.steps}")
        require_positive(self, ("lr", "acausal_lam", "equivalence_margin", "sigma"))
        require_at_least(self, ("acausal_eta",), 0)
        require(0 < self.pi < 1, "pi", f"must lie in (0, 1); got {self.pi}")
        require(len(self.rhos) >= 1 and all(-1 <= r <= 1 for r in self.rhos), "rhos",
                f"must be a non-empty tuple of values in [-1, 1]; got {self.rhos}")
        for f in ("windows", "hmm_windows", "chain_windows", "ks"):
            v = getattr(self, f)
            require(len(v) >= 1 and all(w >= 1 for w in v), f,
                    f"must be a non-empty tuple of ints >= 1; got {v}")
        for f in ("windows", "hmm_windows", "chain_windows"):
            require(max(getattr(self, f)) <= self.length, f,
                    f"windows must not exceed length ({self.length}); got {getattr(self, f)}")
        worst = max(self.ks) * max((*self.windows, *self.hmm_windows, *self.chain_windows))
        require(worst < self.n_latents, "n_latents",
                f"must exceed k * T (up to {worst}) so TopK keeps fewer than all latents; "
                f"got {self.n_latents}")


QUICK = Config(rhos=(0.0, 0.9), windows=(3,), ks=(1,), seeds=2, steps=200, batch_size=64,
               n_latents=24, d=8, n_features=16, pi=0.1, length=32, n_train=16, n_test=4,
               n_states=4, sigma=0.8, n_chains=4, hmm_windows=(3,), chain_windows=(3,))
FULL = Config()
