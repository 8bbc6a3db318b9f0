"""Crosscoders: sparse dictionaries over one or several activation sites.

``fit`` trains an SAE (``window=1``) or a temporal crosscoder (``window=W``) on an
in-memory activation array, ``train`` on an on-disk activation store sharded over a
mesh; both run the one trainer of :mod:`jaxkit.crosscoder.train` (on
:func:`jaxkit.training.fit`: divergence guard, checkpoints, exact resume).
``encode``/``decode`` apply the result. The pure building blocks (activations, losses,
the train step, metrics, cross-layer transcoders) live in
:mod:`jaxkit.kernels.crosscoder`; the command line is :mod:`jaxkit.crosscoder.cli`.
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
from jaxkit.training import TrainingDiverged

from ._fit import FitInfo, FitResult, decode, encode, fit, make_windows
from .train import TrainResult, restore, train

__all__ = [
    "FitInfo",
    "FitResult",
    "Params",
    "TrainResult",
    "TrainState",
    "TrainingDiverged",
    "decode",
    "encode",
    "fit",
    "make_train_step",
    "make_windows",
    "mcc_hungarian",
    "mmcs",
    "recovery",
    "recovery_auc",
    "restore",
    "steer",
    "train",
]
