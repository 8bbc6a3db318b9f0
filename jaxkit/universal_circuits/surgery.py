"""Model surgery: write a class into a model that never learnt it, with no gradient step
in that model.

The receiving model (the CNN) is trained without class ``c`` (its images are removed from
its training stream, so ``c`` is never a target). A transcoder is trained over the
giving model (the MLP, which knows ``c``) and the receiving model; the giver's circuit
for ``c`` (:mod:`jaxkit.universal_circuits.circuits`) and the transcoder's decoders
into the receiver's last layer give the receiver a new head column for ``c`` by one
ridge least-squares solve on transcoder weights
(:func:`jaxkit.kernels.crosscoder.surgery_head`): no gradient of the receiver is ever
taken. Reported: recall of ``c`` and accuracy on the other classes before and after,
against chance and against a linear probe trained (with gradients, on all classes) on
the receiver's last layer, the upper reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit.analysis_jit import analysis_jit
from jaxkit.kernels import crosscoder as cc

from .models import Classifier, _logits_jit
from .transcoder import model_sites

__all__ = ["transfer", "probe", "evaluate"]


_surgery_head = analysis_jit(cc.surgery_head, static_argnums=(1, 2, 3, 4, 10))


def transfer(params, spec, giver: int, receiver: int, cls: int, gate, clfs, mparams,
             ridge: float) -> Any:
    """The receiver's parameters with class ``cls`` written into its head."""
    Wg, bg = clfs[giver].head(mparams[giver])
    Wr, br = clfs[receiver].head(mparams[receiver])
    gate = np.asarray(gate, np.float32).reshape(spec.n_depths, spec.n_latents)
    W, b = _surgery_head(params, spec, giver, receiver, cls, gate, Wg, bg, Wr, br, ridge)
    return clfs[receiver].with_head(mparams[receiver], W, b)


def evaluate(pred: np.ndarray, y: np.ndarray, cls: int, n_classes: int) -> dict:
    """Recall of ``cls``, accuracy on the other classes and the confusion matrix."""
    pred, y = np.asarray(pred), np.asarray(y)
    conf = np.zeros((n_classes, n_classes), int)
    np.add.at(conf, (y, pred), 1)
    hit = (pred == y).astype(np.float64)
    return dict(recall=float(hit[y == cls].mean()), other=float(hit[y != cls].mean()),
                correct=hit, confusion=conf)


def predictions(clf: Classifier, params, x) -> np.ndarray:
    return np.asarray(np.argmax(np.asarray(_logits_jit(clf)(params, x)), -1))


def probe(clf: Classifier, params, x_train, y_train, x_test) -> np.ndarray:
    """Test predictions of a logistic-regression probe on the model's last layer,
    trained on all classes (the gradient-using upper reference)."""
    from sklearn.linear_model import LogisticRegression

    h_tr = model_sites([clf], [params], x_train)[0][-1]
    h_te = model_sites([clf], [params], x_test)[0][-1]
    scale = max(float(np.abs(h_tr).max()), 1e-9)
    lr = LogisticRegression(max_iter=2000, C=1.0).fit(h_tr / scale, y_train)
    return lr.predict(h_te / scale)
