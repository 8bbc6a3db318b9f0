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
the receiver's last layer, the upper reference. Controls: the same solve with a random
gate of the circuit's size or with another class's circuit, and a receiver-only
class-mean head (:func:`class_mean_head`: no giver, no transcoder, the receiver's own
features of a few labelled images of the class).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit.analysis_jit import analysis_jit
from jaxkit.kernels import crosscoder as cc

from .models import Classifier, logits_jit
from .results import SurgeryEval
from .transcoder import model_sites

__all__ = ["transfer", "probe", "evaluate", "class_mean_head", "predictions"]


_surgery_head = analysis_jit(cc.surgery_head, static_argnums=(1, 2, 3, 4, 10))


def transfer(params, spec, giver: int, receiver: int, cls: int, gate, clfs, mparams,
             ridge: float) -> Any:
    """The receiver's parameters with class ``cls`` written into its head."""
    Wg, bg = clfs[giver].head(mparams[giver])
    Wr, br = clfs[receiver].head(mparams[receiver])
    gate = np.asarray(gate, np.float32).reshape(spec.n_depths, spec.n_latents)
    W, b = _surgery_head(params, spec, giver, receiver, cls, gate, Wg, bg, Wr, br, ridge)
    return clfs[receiver].with_head(mparams[receiver], W, b)


def evaluate(pred: np.ndarray, y: np.ndarray, cls: int, n_classes: int) -> SurgeryEval:
    """Recall of ``cls``, accuracy on the other classes, per-image correctness and the
    confusion matrix."""
    pred, y = np.asarray(pred), np.asarray(y)
    conf = np.zeros((n_classes, n_classes), int)
    np.add.at(conf, (y, pred), 1)
    hit = (pred == y).astype(np.float64)
    return SurgeryEval(recall=float(hit[y == cls].mean()), other=float(hit[y != cls].mean()),
                       correct=hit, confusion=conf)


def predictions(clf: Classifier, params, x) -> np.ndarray:
    return np.asarray(np.argmax(np.asarray(logits_jit(clf)(params, x)), -1))


def probe(clf: Classifier, params, x_train, y_train, x_test) -> np.ndarray:
    """Test predictions of a logistic-regression probe on the model's last layer,
    trained on all classes (the gradient-using upper reference)."""
    from sklearn.linear_model import LogisticRegression

    h_tr = model_sites([clf], [params], x_train)[0][-1]
    h_te = model_sites([clf], [params], x_test)[0][-1]
    scale = max(float(np.abs(h_tr).max()), 1e-9)
    lr = LogisticRegression(max_iter=2000, C=1.0).fit(h_tr / scale, y_train)
    return lr.predict(h_te / scale)


def class_mean_head(clf: Classifier, params, x, y, cls: int) -> Any:
    """The receiver with a class-mean (prototype) head column for ``cls``: the control that
    uses no giver and no transcoder, only the receiver's last layer ``h`` on labelled
    images ``x, y`` (the discovery images; ``cls`` among them) and no gradient.

    With ``mu_c`` the mean of ``h`` over the images of ``cls`` and ``mu_o`` over the
    others, ``v = mu_c - mu_o``, the centred logit of ``cls`` (its logit minus the mean
    of the other classes' logits, as :func:`jaxkit.kernels.crosscoder.surgery_head`
    writes it) is set to ``M (2 (h - mu_o) . v / |v|^2 - 1)``: ``+M`` at ``mu_c``, ``-M``
    at ``mu_o``, where ``M`` is the receiver's own mean centred logit of each other class
    on that class's images (its typical margin).

    Args:
        clf, params: the receiver.
        x, y: labelled images (every class present).
        cls: the class to write.

    Returns:
        The receiver's parameters with column ``cls`` of its head replaced.

    Raises:
        ValueError: naming ``y`` when it has no image of ``cls``.
    """
    y = np.asarray(y)
    if not (y == cls).any():
        raise ValueError(f"`y` has no image of class {cls}")
    h = np.asarray(model_sites([clf], [params], x)[0][-1], np.float64)
    W, b = (np.asarray(a, np.float64) for a in clf.head(params))
    C = W.shape[1]
    others = np.arange(C) != cls
    mean_W, mean_b = W[:, others].mean(1), b[others].mean()
    centred = h @ W + b - (h @ mean_W + mean_b)[:, None]
    M = float(np.mean([centred[y == k, k].mean() for k in np.flatnonzero(others)
                       if (y == k).any()]))
    mu_c, mu_o = h[y == cls].mean(0), h[y != cls].mean(0)
    v = mu_c - mu_o
    w = 2 * M * v / max(float(v @ v), 1e-12)
    W2, b2 = W.copy(), b.copy()
    W2[:, cls], b2[cls] = mean_W + w, mean_b - M - w @ mu_o
    return clf.with_head(params, np.asarray(W2, np.float32), np.asarray(b2, np.float32))
