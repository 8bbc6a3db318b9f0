"""Crosscoders: sparse dictionaries over one or several activation sites.

``fit`` trains an SAE (``window=1``) or a temporal crosscoder (``window=W``) on an
in-memory activation array; ``encode``/``decode`` apply the result. The pure building
blocks (activations, losses, the train step, metrics, cross-layer transcoders) live in
:mod:`jaxkit.kernels.crosscoder`.
"""

from jaxkit.kernels.crosscoder import (
    Params,
    TrainState,
    make_train_step,
    mcc_hungarian,
    mmcs,
    recovery,
    recovery_auc,
    steer,
)

from ._fit import FitResult, decode, encode, fit, make_windows

__all__ = [
    "FitResult",
    "Params",
    "TrainState",
    "decode",
    "encode",
    "fit",
    "make_train_step",
    "make_windows",
    "mcc_hungarian",
    "mmcs",
    "recovery",
    "recovery_auc",
    "steer",
]
