"""Sequence-model kernels: selective state-space scans (Mamba-1, sequential and
associative; Mamba-2 chunked SSD), causal attention, the MLP, normalisation, the causal
depthwise convolution and the Mamba-1 and Mamba-2 mixers assembled from them.

Every block is a pure function of a NamedTuple of weights and the input, written once
and shared by the composed language models (:mod:`jaxkit.compose`) and the benchmarks.
Scan states and exponentials are float32 whatever the input dtype.

Modules: ``scan``, ``ssd``, ``attention``, ``linear``, ``mlp``, ``norm``, ``conv``, ``mamba``,
``mamba2``; every public name is re-exported here.
"""

from .attention import (
    AttentionParams,
    causal_attention,
    causal_attention_heads,
    init_attention,
    self_attention,
)
from .conv import causal_conv1d
from .linear import linear
from .mamba import MambaParams, init_mamba, mamba_mixer
from .mamba2 import Mamba2Params, init_mamba2, mamba2_mixer
from .mlp import MLPParams, gelu, init_mlp, mlp
from .norm import layer_norm, rms_norm
from .scan import (
    ScanResult,
    selective_scan,
    selective_scan_associative,
    selective_scan_sequential,
)
from .ssd import SSDResult, segsum, ssd_chunked, ssd_sequential

__all__ = [
    "AttentionParams", "MLPParams", "MambaParams", "ScanResult", "SSDResult",
    "causal_attention", "causal_attention_heads", "self_attention", "init_attention",
    "mlp", "init_mlp", "gelu",
    "layer_norm", "rms_norm", "causal_conv1d", "linear", "mamba_mixer", "init_mamba",
    "selective_scan", "selective_scan_sequential", "selective_scan_associative",
    "segsum", "ssd_chunked", "ssd_sequential", "Mamba2Params", "mamba2_mixer", "init_mamba2",
]
