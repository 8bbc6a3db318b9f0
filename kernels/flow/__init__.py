"""Flow matching: probability paths, conditional flow-matching losses, ODE samplers and
exact / stochastic log-likelihoods.

Paths ``(x0, x1, t) -> (x_t, u_t)`` with ``u_t = d x_t / dt`` (conditional on the pair):

* :func:`linear_path`: ``x_t = (1 - t) x0 + t x1 (+ sigma eps)``, ``u_t = x1 - x0``
  (rectified flow: Liu et al., ICLR 2023; I-CFM: Tong et al., TMLR 2024).
* :func:`cond_ot_path`: ``x_t = (1 - (1 - s) t) x0 + t x1``, ``u_t = x1 - (1 - s) x0``
  (Lipman et al., "Flow matching for generative modeling", ICLR 2023).
* :func:`vp_path`: ``x_t = cos(pi t / 2) x0 + sin(pi t / 2) x1 (+ sigma eps)``
  (trigonometric / VP; torchcfm's ``VariancePreservingConditionalFlowMatcher(sigma)``).
* :func:`sb_path`: Schrodinger-bridge CFM (Tong et al., AISTATS 2024): Brownian bridge
  ``x_t ~ N((1 - t) x0 + t x1, sigma^2 t (1 - t))`` with
  ``u_t = (1 - 2t) / (2 t (1 - t) + 1e-8) (x_t - mu_t) + x1 - x0`` as torchcfm
  (``x1 - x0`` at ``t = 0`` and ``t = 1``).

The noisy paths take ``noise=`` (a given ``eps``, as torchcfm's ``sample_xt``) instead of
drawing it from ``key``.

Losses: :func:`cfm_loss` (one sample, linear path) and :func:`cfm_batch_loss` (a batch,
any path, optional labels with classifier-free-guidance label dropout);
:func:`cfg_velocity` combines conditional and unconditional velocities
(Ho & Salimans 2022). Minibatch-OT couplings live in :mod:`jaxkit.kernels.flow_ot`.

Samplers: :func:`integrate` (fixed-step Euler / midpoint / Heun / RK4 in one
``lax.scan``, or adaptive Tsit5 / Dopri5 / Dopri8 through diffrax) and
:func:`integrate_with_stats` (also returns the number of velocity evaluations).
:func:`log_likelihood`: instantaneous change of variables (Chen et al., NeurIPS 2018;
Grathwohl et al., FFJORD, ICLR 2019) with exact or Hutchinson divergence.

Conventions: the leading axis of every leaf is the batch axis for the batched losses;
``t`` of shape ``(B,)`` is broadcast against each leaf. All functions are pure and
``jit``/``vmap``/``grad``-able (method names, step counts and flags are static).

Modules: ``paths``, ``losses``, ``integrators``, ``likelihood``; every public name is
re-exported here, with :func:`check_batch` (the batch-pair check the couplings of
:mod:`jaxkit.kernels.flow_ot` share).
"""

from ._tree import check_batch as check_batch  # not a kernel: outside __all__
from .integrators import (
    ADAPTIVE_METHODS,
    FIXED_METHODS,
    METHODS,
    integrate,
    integrate_with_stats,
)
from .likelihood import gaussian_logp, log_likelihood
from .losses import cfg_velocity, cfm_batch_loss, cfm_loss, drop_labels
from .paths import PATHS, cond_ot_path, linear_path, sample_path, sb_path, vp_path

__all__ = [
    "METHODS", "FIXED_METHODS", "ADAPTIVE_METHODS", "PATHS",
    "linear_path", "cond_ot_path", "vp_path", "sb_path", "sample_path",
    "cfm_loss", "cfm_batch_loss", "drop_labels", "cfg_velocity",
    "integrate", "integrate_with_stats", "log_likelihood", "gaussian_logp",
]
