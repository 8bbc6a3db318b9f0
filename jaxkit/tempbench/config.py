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

Reference setting (``reference``, :mod:`jaxkit.tempbench.reference`; the section ``ref``,
:class:`ReferenceSettings`): orthogonal Markov features (``ref.features`` directions in
``ref.d`` dimensions, persistence ``ref.rho``), every baseline (``ref.methods``, empty
for all) with ``ref.latents`` latents at each window of ``ref.windows`` and budget of
``ref.ks``, ``steps`` steps, ``seeds`` seeds.

Panels: ``panel`` is ``"all"`` (synthetic and real), ``"real"`` (the real panel only)
or ``"synthetic"``.

Real activations: the pretrained model ``lm_model`` (:func:`jaxkit.lm.load`;
SmolLM2-135M-Instruct by default) run over ``real.docs`` documents of ``doc_len`` tokens
(plus one context token) of ``corpus`` (``"stdlib"``: English prose shipped with Python,
:func:`jaxkit.lm.record.stdlib_corpus`; or a UTF-8 file), the residual stream after each
block of ``lm_layers`` recorded into the activation store (``real.docs_per_shard``
documents per safetensors shard); the dictionaries read block ``act_layer`` (one of
``lm_layers``), the multi-layer crosscoder all of them. With ``acts_dir`` set, a user's
store instead (checked when the configuration is built, before anything runs:
:func:`jaxkit.tempbench.lm_acts.check_store`). Every method of
:data:`jaxkit.tempbench.baselines.ALL_METHODS` (or ``real.methods``, which must include
``tc``) gets ``real.latents`` latents, ``real.k`` active latents per token, ``real.steps``
steps, for each window of ``real.windows`` and ``real.seeds`` seeds (the section ``real``,
:class:`RealSettings`); probes use
``k_probe`` latents on at most ``probe_docs`` held-out documents (half fit, half test);
the loss recovered is measured on ``splice_docs`` held-out documents.
Backtracking (model runs only): ``bt_docs`` documents of generated traces, detection at
false-positive rate ``bt_fpr``, steering atoms of norm ``steer_scale`` sqrt(d) (recorded
units; 0 skips steering) at up to ``steer_sites`` positions. The paper rows' margins,
fixed before the run: ``real_margin`` (AUROC), ``bt_margin`` (detection rate, and log-prob
of the correction token for steering). ``store_steps`` steps of the temporal crosscoder
streamed from the store with the dictionary sharded over the mesh's ``model`` axis (0
skips it).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

__all__ = ["ReferenceSettings", "RealSettings", "Config", "QUICK", "FULL"]


@dataclass(frozen=True)
class ReferenceSettings(PipelineConfig):
    """The reference setting (:mod:`jaxkit.tempbench.reference`, run with
    ``reference=true``), the section ``ref`` of :class:`Config`
    (``--set ref.latents=128``): orthogonal Markov features and every baseline, trained
    with the synthetic panel's ``steps`` and ``seeds``. (:class:`Config` checks the
    windows against its ``length``.)

    Attributes:
        d: dimensions of the activations.
        features: orthogonal feature directions (at most ``d``).
        rho: the features' persistence, in [-1, 1].
        windows: the windows T of the crosscoders.
        ks: the per-token budgets k.
        latents: latents per dictionary (more than k * T).
        methods: the baselines of :data:`jaxkit.tempbench.reference.REF_METHODS`
            compared, including ``tc`` (empty: all).
    """

    d: int = 32
    features: int = 24
    rho: float = 0.9
    windows: tuple[int, ...] = (2, 5)
    ks: tuple[int, ...] = (1, 2)
    latents: int = 64
    methods: tuple[str, ...] = ()

    def validate(self) -> None:
        from .reference import REF_METHODS

        require_at_least(self, ("d", "features", "latents"))
        require(self.features <= self.d, "features",
                f"must be <= d ({self.d}) (orthogonal features); got {self.features}")
        require(set(self.methods) <= set(REF_METHODS) and (
            not self.methods or "tc" in self.methods), "methods",
            f"must be methods of {REF_METHODS} including 'tc' (or empty: all); got "
            f"{self.methods}")
        require(-1 <= self.rho <= 1, "rho", f"must lie in [-1, 1]; got {self.rho}")
        for f in ("windows", "ks"):
            v = getattr(self, f)
            require(len(v) >= 1 and all(w >= 1 for w in v), f,
                    f"must be a non-empty tuple of ints >= 1; got {v}")
        require(max(self.windows) * max(self.ks) < self.latents, "latents",
                f"must exceed k * T (up to {max(self.windows) * max(self.ks)}); got "
                f"{self.latents}")


@dataclass(frozen=True)
class RealSettings(PipelineConfig):
    """The dictionaries of the real panel (:mod:`jaxkit.tempbench.panel`), the section
    ``real`` of :class:`Config` (``--set real.steps=200``). The model, the layers, the
    corpus, ``doc_len`` and the evaluations (probes, splicing, backtracking) stay in
    :class:`Config`, which also checks ``steps`` against its ``log_every`` and
    ``windows`` against its ``doc_len``.

    Attributes:
        docs: documents recorded into the activation store (at least 8: held-out probe
            documents).
        docs_per_shard: documents per safetensors shard of the store.
        windows: the windows T of the temporal crosscoders.
        latents: latents per dictionary (more than ``k`` * T).
        k: active latents per token.
        steps: Adam steps per training.
        seeds: seeds per window.
        methods: the methods of :data:`jaxkit.tempbench.baselines.ALL_METHODS` compared,
            including ``tc`` (empty: all).
    """

    docs: int = 4096
    docs_per_shard: int = 512
    windows: tuple[int, ...] = (2, 5)
    latents: int = 768
    k: int = 8
    steps: int = 600
    seeds: int = 3
    methods: tuple[str, ...] = ()

    def validate(self) -> None:
        from .baselines import ALL_METHODS

        require_at_least(self, ("docs", "docs_per_shard", "latents", "k", "steps", "seeds"))
        require(set(self.methods) <= set(ALL_METHODS) and (
            not self.methods or "tc" in self.methods), "methods",
            f"must be methods of {ALL_METHODS} including 'tc' (or empty: all); got "
            f"{self.methods}")
        require(len(self.windows) >= 1 and all(w >= 2 for w in self.windows), "windows",
                f"must be windows >= 2; got {self.windows}")
        require(max(self.windows) * self.k < self.latents, "latents",
                f"must exceed k * T (up to {max(self.windows) * self.k}); got "
                f"{self.latents}")
        require(self.docs >= 8, "docs", f"must be >= 8 (held-out probe documents); "
                f"got {self.docs}")


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run tempbench`` (see the module docstring).

    Tasks: ``d``-dimensional activations, sequences of ``length`` tokens, ``n_train`` /
    ``n_test`` sequences per seed; Markov features (``n_features`` directions, firing
    rate ``pi``, persistences ``rhos``, windows ``windows``, per-token budgets ``ks``),
    HMM denoising (``n_states`` states, noise ``sigma``, windows ``hmm_windows``),
    ordered chains (``n_chains`` chains of 3, windows ``chain_windows``); ``seeds``
    independent data sets and trainings per setting. ``ref``: the reference setting
    (:class:`ReferenceSettings`: ``ref.d``, ``ref.latents``, ...); ``real``: the real
    panel's dictionaries (:class:`RealSettings`: ``real.docs``, ``real.steps``, ...)."""

    rhos: tuple[float, ...] = (0.0, 0.5, 0.9)
    windows: tuple[int, ...] = (2, 5)
    ks: tuple[int, ...] = (1, 2)
    seeds: int = 3
    steps: int = 800
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
    bt_margin: float = 0.01
    reference: bool = True
    ref: ReferenceSettings = ReferenceSettings()
    panel: str = "all"
    acts_dir: str = ""
    lm_model: str = "smollm2-135m"
    lm_layers: tuple[int, ...] = (6, 12, 18)
    act_layer: int = 12
    corpus: str = "stdlib"
    doc_len: int = 64
    real: RealSettings = RealSettings()
    k_probe: int = 5
    splice_docs: int = 16
    probe_docs: int = 128
    bt_docs: int = 192
    bt_fpr: float = 0.05
    steer_scale: float = 1.0
    steer_sites: int = 64
    store_steps: int = 400

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
        require_at_least(self, ("doc_len", "k_probe", "splice_docs", "probe_docs"))
        require_at_least(self, ("act_layer", "store_steps", "bt_docs", "steer_sites",
                                "bt_margin"), 0)
        require(self.panel in ("all", "real", "synthetic"), "panel",
                f"must be 'all', 'real' or 'synthetic'; got {self.panel!r}")
        require(self.steer_scale >= 0, "steer_scale", f"must be >= 0; got {self.steer_scale}")
        require(0 < self.bt_fpr < 1, "bt_fpr", f"must lie in (0, 1); got {self.bt_fpr}")
        require(len(self.lm_layers) >= 1 and len(set(self.lm_layers)) == len(self.lm_layers)
                and all(x >= 0 for x in self.lm_layers), "lm_layers",
                f"must be distinct blocks >= 0; got {self.lm_layers}")
        require(self.act_layer in self.lm_layers, "act_layer",
                f"must be one of lm_layers {self.lm_layers}; got {self.act_layer}")
        require(self.real.steps % self.log_every == 0, "real.steps",
                f"must be a multiple of log_every ({self.log_every}); got {self.real.steps}")
        require(all(w < self.doc_len - 1 for w in self.real.windows), "real.windows",
                f"must be windows in [2, doc_len - 1); got {self.real.windows}")
        require(max(self.ref.windows) <= self.length, "ref.windows",
                f"windows must not exceed length ({self.length}); got {self.ref.windows}")
        if self.corpus != "stdlib" and not self.acts_dir:
            from pathlib import Path

            require(Path(self.corpus).is_file(), "corpus",
                    f"must be 'stdlib' or a text file; got {self.corpus!r}")
        if self.acts_dir and self.panel != "synthetic":
            from .lm_acts import check_store

            try:
                check_store(self.acts_dir)
            except ValueError as e:
                raise ValueError(str(e) if "acts_dir" in str(e) else f"acts_dir: {e}") \
                    from None
        worst = max(self.ks) * max((*self.windows, *self.hmm_windows, *self.chain_windows))
        require(worst < self.n_latents, "n_latents",
                f"must exceed k * T (up to {worst}) so TopK keeps fewer than all latents; "
                f"got {self.n_latents}")


# QUICK: a small synthetic panel; the real panel records SmolLM2's block 12 over 64
# documents of 64 tokens (4,096 tokens) and compares the temporal crosscoder with the
# per-token SAE (every baseline in FULL) at T 3, two seeds, 100 steps; the reference
# setting compares the TC with the acausal crosscoder and TFA only.
QUICK = Config(rhos=(0.0, 0.9), windows=(3,), ks=(1,), seeds=2, steps=100, batch_size=64,
               n_latents=32, d=16, n_features=32, pi=0.05, length=64, n_train=72, n_test=4,
               n_states=4, sigma=0.8, n_chains=4, hmm_windows=(3,), chain_windows=(3,),
               lm_layers=(12,), act_layer=12, doc_len=64,
               real=RealSettings(docs=64, docs_per_shard=32, windows=(3,), latents=256, k=2,
                                 steps=100, seeds=2, methods=("sae", "tc")),
               store_steps=0, splice_docs=4, bt_docs=32, steer_sites=16,
               ref=ReferenceSettings(d=16, features=12, windows=(3,), ks=(1,), latents=32,
                                     methods=("tc", "acausal", "tfa")))
# FULL, sized for about an hour on a 2-core CPU (an estimate from single-training timings
# under load, not a recorded run): the synthetic panel at 3 persistences and 800 steps
# (the recorded 5-persistence, 1,200-step panel took 81 minutes), the reference setting
# with every baseline at T 2 and 5, k 1 and 2, and the real panel over 4,096 documents of
# 64 tokens (262,144 tokens) of SmolLM2 blocks 6, 12, 18, every method at 768 latents,
# 8 active per token, 600 steps, 3 seeds.
FULL = Config()
