"""Charge balance over species channels (AMGenC-style amorphous-cell generation).

A cell has ``N`` atom slots (some of them padding, excluded by a boolean ``mask``) and
``K`` species, each an (element, oxidation state) pair with an integer charge ``q[k]``.
Charge balance is enforced at three points of sampling:

1. :func:`balanced_noise` (:mod:`.noise`): iid Gaussian noise conditioned on zero total
   charge, i.e. the orthogonal projection onto the hyperplane ``sum_i q . x_i = 0``.
2. :func:`project_soft` / :func:`relax` (:mod:`.soft`): the Euclidean projection of an
   ``(N, K)`` matrix of species probabilities onto {every unmasked row on the
   probability simplex, total charge zero} (semismooth Newton, :mod:`.semismooth`, with
   a bracketed root search as fallback; row-wise simplex projections in
   :mod:`.simplex`), and the soft step ``p + eta (proj(p) - p)`` applied at each
   sampling step.
3. :func:`project_discrete` (:mod:`.discrete`): the exact discrete projection, one
   species per atom with minimal total cost (e.g. ``-log p``) and total charge exactly
   zero: Lagrangian reduced-cost fixing (:func:`reduced_cost_fixing`) with a small
   certified dynamic program, falling back to dynamic programming over the whole running
   charge (:mod:`.dp`); :func:`project_discrete_approx` (:mod:`.lagrangian`) is the
   Lagrangian route with a small repair DP and no certificate, and
   :func:`lagrangian_bound` exposes its dual bound (a lower bound on the exact optimum,
   for optimality-gap measurements).
4. :func:`project_composition` (:mod:`.composition`): the same exact projection with the
   number of atoms of each element prescribed (a design's composition); the balanced
   oxidation-state splits of multivalent elements (:func:`composition_splits`) are
   enumerated and each solved as a transportation problem by successive shortest paths;
   :func:`project_splits` takes those species counts as a (traceable) array, so one
   compiled program serves targets of any composition.

Conventions. Masked-out rows are excluded from every constraint: :func:`balanced_noise`
returns zeros there, :func:`project_soft` and :func:`relax` return them unchanged, and the
discrete projections assign them ``-1``. All functions are pure, keep fixed shapes, and run
under ``jit`` and ``vmap`` over cells. The discrete projections need ``q`` as a concrete
array (NumPy or a Python list): its range sets the DP's static state-space size.

Feasibility is reported, never assumed: a result carries ``feasible=False`` when no
balanced answer exists (every charge of one strict sign, no unmasked atom, an atom with
no allowed species, or -- discretely -- no balanced assignment, e.g. Si4+/O2- with an atom
count not divisible by 3). Charges that can never balance (``min q > 0`` or ``max q < 0``)
raise ``ValueError`` when ``q`` is concrete. NaN inputs raise ``ValueError`` on concrete
arrays and an :func:`equinox.error_if` run-time error under ``jit``/``vmap``.

Layout: one concept per module; the names below are the public API (import them from
here). Modules with a leading underscore hold shared plumbing (input checks, the
discrete result type and scoring, unrolled species sums).

References: Duchi, Shalev-Shwartz, Singer & Chandra, "Efficient projections onto the
l1-ball for learning in high dimensions", ICML 2008 (sort-based simplex projection);
Qi & Sun, "A nonsmooth version of Newton's method", Math. Programming 1993 (semismooth
Newton, here on the piecewise-linear KKT system of the soft projection);
Michelot, "A finite algorithm for finding the projection of a point onto the canonical
simplex of R^n", JOTA 1986 (the sort-free simplex projection); Sinha & Zoltners, "The
multiple-choice knapsack problem", Oper. Res. 1979 (the LP relaxation / Lagrangian dual
of the multiple-choice knapsack); reduced-cost fixing as in Nemhauser & Wolsey,
"Integer and Combinatorial Optimization", 1988; successive shortest paths as in Ahuja,
Magnanti & Orlin, "Network Flows", 1993, ch. 9.
"""

from ._assign import DiscreteProjection
from .composition import composition_splits, project_composition, project_splits
from .discrete import FixingResult, project_discrete, reduced_cost_fixing
from .dp import dp_width
from .lagrangian import LagrangianBound, lagrangian_bound, project_discrete_approx
from .noise import balanced_noise
from .semismooth import SemismoothResult, semismooth_newton
from .simplex import simplex_rows
from .soft import SoftProjection, project_soft, relax

__all__ = [
    "SoftProjection",
    "DiscreteProjection",
    "LagrangianBound",
    "balanced_noise",
    "simplex_rows",
    "project_soft",
    "relax",
    "dp_width",
    "project_discrete",
    "lagrangian_bound",
    "project_discrete_approx",
    "composition_splits",
    "project_composition",
    "project_splits",
    "SemismoothResult",
    "semismooth_newton",
    "FixingResult",
    "reduced_cost_fixing",
]
