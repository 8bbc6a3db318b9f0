"""Universal Circuits: cross-model, cross-layer transcoders between two vision models,
shared class circuits, and model surgery without gradient steps.

Claims under test (the Universal Circuits paper): a compact cross-model intersection of
pruned class circuits gives 89-98% of the full circuit's classification accuracy in both
models; a complementary set of universal latents is kept by one model's circuit only;
a class can be transferred from one model to another with no gradient step in the
receiving model. Here on real digits (scikit-learn) with an MLP and a CNN (flax nnx).

Modules: :mod:`.data` (digits, augmentation), :mod:`.models` (the classifiers and their
training), :mod:`.transcoder` (recording activations, training the transcoders),
:mod:`.circuits` (attribution, pruning, intersections, baselines), :mod:`.universality`
(universal latents calibrated against a shuffled null), :mod:`.surgery`,
:mod:`.experiment` (the stages), :mod:`.report`, :mod:`.config`; ``jaxkit run
universal-circuits`` is :mod:`.pipeline`. The kernels are in
:mod:`jaxkit.kernels.crosscoder` (``cross_model``, ``attribution``, ``circuits``).
"""

from . import circuits, config, data, experiment, models, surgery, transcoder, universality
from .config import FULL, QUICK, Config

__all__ = ["circuits", "config", "data", "experiment", "models", "surgery", "transcoder",
           "universality", "Config", "QUICK", "FULL"]
