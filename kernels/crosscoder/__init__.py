"""Sparse autoencoders and crosscoders: one dictionary, specialised by the site shape.

Inputs ``x`` have shape ``(B, *site, d)``: ``site = ()`` is a sparse autoencoder (SAE),
``(T,)`` a temporal crosscoder over T consecutive positions, ``(V,)`` an acausal
crosscoder over V layers/models, ``(V, T)`` both. With ``W_enc (*site, d, F)`` and
``W_dec (F, *site, d)``::

    pre   = einsum(x, W_enc) + b_enc            (sum over site and d)
    z     = sparsify(pre)                       (ReLU, TopK, BatchTopK, JumpReLU, ...)
    x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec

and every decoder atom ``W_dec[f]`` has unit norm jointly over ``(*site, d)``. A TopK
training step is computed sparsely by default (one dense encoder product; gathered atoms
and scatter-add gradients for the rest, as in EleutherAI's sparsify).

Modules (every public name is re-exported here):

* :mod:`.params` -- :class:`Params`, :func:`init`, :func:`geometric_median`, the checks;
* :mod:`.activations` -- ReLU, TopK, BatchTopK, threshold, JumpReLU and its STE;
* :mod:`.model` -- encode, decode, forward, steer;
* :mod:`.losses` -- penalties, AuxK, the dense loss, the decoder constraints;
* :mod:`.sparse` -- the sparse TopK loss (custom VJPs) and its static blocking;
* :mod:`.step` -- :func:`make_train_step` on :func:`jaxkit.kernels.train.make_train_step`;
* :mod:`.metrics` -- FVU, L0, dead latents, MMCS, Hungarian MCC, recovery;
* :mod:`.clt` -- cross-layer transcoders;
* :mod:`.cross_model` -- cross-model cross-layer transcoders (Universal Circuits);
* :mod:`.attribution` -- their replacement model and latent-to-logit attribution;
* :mod:`.circuits` -- class-circuit pruning, intersections, universal latents, surgery;
* :mod:`.faithfulness` -- the replacement model's output fidelity (top-1 agreement, KL
  fidelity against an ablation baseline) and normalised circuit faithfulness;
* :mod:`.temporal_baselines` -- Matryoshka, multi-layer crosscoder views, T-SAE, TFA.

The public names are listed once, in this package's ``__all__``.

References:
  * Bricken et al. 2023, "Towards monosemanticity" (ReLU SAE, L1 with decoder norms).
  * Gao et al. 2024, "Scaling and evaluating sparse autoencoders" (TopK, AuxK, FVU,
    decoder-parallel gradient removal, tied initialisation, geometric-median b_dec).
  * Bussmann et al. 2024, "BatchTopK sparse autoencoders" (batch TopK, inference
    threshold).
  * Rajamanoharan et al. 2024, "Jumping ahead: improving reconstruction fidelity with
    JumpReLU SAEs" (JumpReLU, straight-through rectangle-kernel estimator, L0 penalty).
  * Lindsey et al. 2024, "Sparse crosscoders for cross-layer features and model diffing"
    (acausal crosscoders); Ameisen et al. 2025 "Circuit tracing" (cross-layer
    transcoders).

Everything here is pure: it runs eagerly, under ``jit``, ``vmap`` and ``grad``, and under
``jit`` with the batch sharded over a ``data`` mesh axis and the latents over ``model``.
"""

from __future__ import annotations

from .activations import Selector, batch_topk, jumprelu, relu, sparsify, step_ste, threshold, topk
from .attribution import (
    centred,
    class_attribution,
    uc_accuracy,
    uc_attribution,
    uc_errors,
    uc_replacement,
)
from .circuits import (
    PruneResult,
    check_circuit,
    decoder_norms,
    logit_effects,
    match_by_decoder,
    prefix_gates,
    prune_sweep,
    select_circuit,
    surgery_head,
    universal_latents,
)
from .clt import CLTParams, clt_forward, clt_init, clt_loss, clt_mask
from .cross_model import (
    UCOut,
    UCParams,
    UCSpec,
    check_sites,
    kl_logits,
    uc_decode,
    uc_encode,
    uc_forward,
    uc_init,
    uc_loss,
    uc_source_mask,
    uc_spec,
)
from .faithfulness import Fidelity, circuit_faithfulness, kl_per_image, output_fidelity
from .losses import (
    auxk_loss,
    l0_penalty,
    l1_penalty,
    loss_fn,
    normalize_decoder,
    remove_parallel_grad,
    tanh_penalty,
)
from .metrics import (
    cosine_matrix,
    dead_fraction,
    explained_variance,
    fvu,
    l0,
    mcc_hungarian,
    mmcs,
    reconstruction_cosine,
    recovery,
    recovery_auc,
)
from .model import apply_activation, decode, encode, forward, pre_activation, steer
from .params import (
    ACTIVATIONS,
    AUX_NORMS,
    DEFAULT_BANDWIDTH,
    SPARSITIES,
    Activation,
    Params,
    atom_norms,
    batch_count,
    check_activation,
    check_aux_norm,
    check_batch_k,
    check_k,
    check_x,
    flat_decoder,
    geometric_median,
    init,
    log_threshold_from,
)
from .sparse import Blocks, default_blocks, sparse_decode, sparse_topk_loss, topk_encode
from .step import Carry, Info, StepOut, TrainState, make_train_step
from .temporal_baselines import (
    TFAOut,
    TFAParams,
    contrastive_loss,
    layer_views,
    matryoshka_loss,
    smoothness_loss,
    tfa_forward,
    tfa_init,
    tfa_loss,
    tfa_normalize,
    tsae_loss,
)

__all__ = [
    "Selector",
    "Fidelity",
    "output_fidelity",
    "circuit_faithfulness",
    "kl_per_image",
    "Params",
    "TrainState",
    "Carry",
    "StepOut",
    "Info",
    "CLTParams",
    "Blocks",
    "ACTIVATIONS",
    "SPARSITIES",
    "DEFAULT_BANDWIDTH",
    "Activation",
    "init",
    "geometric_median",
    "check_activation",
    "check_k",
    "check_batch_k",
    "batch_count",
    "check_aux_norm",
    "AUX_NORMS",
    "log_threshold_from",
    "apply_activation",
    "check_x",
    "flat_decoder",
    "atom_norms",
    "relu",
    "topk",
    "batch_topk",
    "threshold",
    "jumprelu",
    "step_ste",
    "sparsify",
    "l1_penalty",
    "l0_penalty",
    "tanh_penalty",
    "pre_activation",
    "encode",
    "decode",
    "forward",
    "loss_fn",
    "auxk_loss",
    "remove_parallel_grad",
    "normalize_decoder",
    "make_train_step",
    "default_blocks",
    "sparse_decode",
    "topk_encode",
    "sparse_topk_loss",
    "clt_init",
    "clt_mask",
    "clt_forward",
    "clt_loss",
    "fvu",
    "explained_variance",
    "l0",
    "dead_fraction",
    "reconstruction_cosine",
    "cosine_matrix",
    "mmcs",
    "mcc_hungarian",
    "recovery",
    "recovery_auc",
    "steer",
    "UCSpec",
    "UCParams",
    "UCOut",
    "uc_spec",
    "uc_init",
    "uc_source_mask",
    "uc_encode",
    "uc_decode",
    "uc_forward",
    "uc_loss",
    "check_sites",
    "kl_logits",
    "centred",
    "uc_errors",
    "uc_replacement",
    "uc_attribution",
    "class_attribution",
    "uc_accuracy",
    "PruneResult",
    "prefix_gates",
    "prune_sweep",
    "select_circuit",
    "check_circuit",
    "decoder_norms",
    "universal_latents",
    "logit_effects",
    "match_by_decoder",
    "surgery_head",
    "TFAParams",
    "TFAOut",
    "tfa_init",
    "tfa_forward",
    "tfa_loss",
    "tfa_normalize",
    "matryoshka_loss",
    "layer_views",
    "contrastive_loss",
    "smoothness_loss",
    "tsae_loss",
]
