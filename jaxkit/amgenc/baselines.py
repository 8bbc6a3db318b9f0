"""Existing ways to get charge-balanced cells out of an unconstrained generator, run on
the same draws as the AMGenC arms (issue 64, part 3).

Each method takes the cells of the unconstrained arm (``"none"``: the same model, keys
and targets as every other arm, so the sample budget is the same: one draw per cell)
and delivers a cell or nothing per draw:

* **rejection sampling**: keep a draw whose argmax species are charge balanced
  (formal oxidation states of :data:`jaxkit.amgenc.tables.OXIDATION_STATES`);
* **oxidation-state filter** (SMACT-like; Davies et al., J. Open Source Softw. 4, 1361,
  2019, do the same with their element data): keep a draw whose *elements* admit one
  integer oxidation state each, from the small table :data:`OXIDATION_TABLE`, with a
  total charge of zero (``sum_e n_e z_e = 0``; iron may take +2 or +3 whichever the
  generated Fe2+/Fe3+ label, but all Fe atoms of a cell the same); a kept draw's species
  are its elements at those states;
* **post-hoc repair**: change the species of as few atoms as possible so that the cell
  is balanced: the exact discrete projection (:func:`jaxkit.kernels.charge.project_discrete`)
  with cost 0 for the generated species and 1 for any other (a Hamming distance; the
  model's probabilities are not used, as when repairing a structure file); positions
  are kept.

The per-draw results (:func:`existing_methods`) feed the paper row "no existing method
effectively mitigates charge imbalance" (:mod:`jaxkit.amgenc.report_more`).
"""

from __future__ import annotations

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np

from .data import Data, element_fractions
from .results import MethodDraws
from .sample import Samples, project_cells
from .tables import ELEMENTS, OXIDATION_STATES, SYMBOLS

__all__ = ["METHODS", "OXIDATION_TABLE", "oxidation_filter", "existing_methods"]

#: the methods, in table order
METHODS = ("rejection sampling", "oxidation-state filter (SMACT-like)",
           "post-hoc repair (fewest species changes)")
#: common oxidation states per chemical symbol (a small table: the filter's whole
#: chemistry)
OXIDATION_TABLE: dict[str, tuple[int, ...]] = {
    "Si": (4,), "B": (3,), "Al": (3,), "P": (3, 5), "Li": (1,), "Na": (1,), "K": (1,),
    "Ca": (2,), "Mg": (2,), "Zn": (2,), "Ba": (2,), "Fe": (2, 3), "O": (-2,)}
_Q = np.array([OXIDATION_STATES[e] for e in ELEMENTS], np.int64)


def oxidation_filter(species: np.ndarray) -> np.ndarray | None:
    """The SMACT-like filter of one cell (module docstring): its species with one
    oxidation state per element that sums to zero (Fe atoms all Fe2+ or all Fe3+), or
    None when no choice from :data:`OXIDATION_TABLE` does. The first balanced choice in
    the table's order is taken.

    Args:
        species: (n,) species indices into :data:`jaxkit.amgenc.tables.ELEMENTS`.

    Returns:
        (n,) species, or None.
    """
    sp = np.asarray(species, np.int64)
    if sp.size == 0 or np.any(sp < 0):
        return None
    sym = np.array(SYMBOLS)[sp]
    names = sorted(set(sym.tolist()))
    counts = [int((sym == s).sum()) for s in names]
    for states in itertools.product(*(OXIDATION_TABLE[s] for s in names)):
        if sum(c * z for c, z in zip(counts, states, strict=True)) == 0:
            out = sp.copy()
            for s, z in zip(names, states, strict=True):
                if s == "Fe":
                    out[sym == "Fe"] = ELEMENTS.index("Fe2+" if z == 2 else "Fe3+")
            # an element whose only table state differs from the vocabulary's (P +3)
            # keeps its species: the filter checks neutrality, it does not relabel
            return out
    return None


def existing_methods(samples: Samples, data: Data, mesh=None) -> dict[str, MethodDraws]:
    """Run every method of :data:`METHODS` on the unconstrained arm's draws.

    Args:
        samples: the sampled arms (``samples.arms["none"]`` is used).
        data: the data (``data.test`` are the targets).
        mesh: the mesh of the repair's projection (None: every device).

    Returns:
        name -> :class:`jaxkit.amgenc.results.MethodDraws`: ``delivered`` (B,) 0/1 (a
        balanced cell came out of the draw), ``composition_l1`` (B,) to the own target
        (NaN where nothing was delivered), ``changed`` (B,) atoms whose species changed,
        ``species`` (B, N) (-1 where nothing was delivered or on padding), ``balanced``
        (B,) 0/1 (delivered and balanced under the vocabulary's formal states: the filter
        may keep a cell that is neutral only with P +3), ``seconds`` (the method's own
        time).
    """
    none = samples.arms["none"]
    mask = np.asarray(samples.mask, bool)
    k = len(ELEMENTS)
    test_f = np.array([element_fractions(c.elements, k) for c in data.test])
    b = mask.shape[0]

    def comp(sp_row, i):
        f = element_fractions(sp_row[mask[i]], k)
        return float(np.abs(f - test_f[samples.target_index[i]]).sum())

    out = {}  # name -> (delivered, species, seconds)
    # rejection sampling
    t0 = time.perf_counter()
    sp = np.where(mask, none.species, -1)
    tot = np.where(mask, _Q[np.maximum(sp, 0)], 0).sum(1)
    keep = (tot == 0) & np.all(np.where(mask, sp >= 0, True), axis=1)
    rej = np.where(keep[:, None], sp, -1)
    out[METHODS[0]] = (keep.astype(float), rej, time.perf_counter() - t0)
    # oxidation-state filter
    t0 = time.perf_counter()
    filt = np.full_like(sp, -1)
    passed = np.zeros(b, bool)
    for i in range(b):
        got = oxidation_filter(sp[i][mask[i]])
        if got is not None:
            passed[i] = True
            filt[i][mask[i]] = got
    out[METHODS[1]] = (passed.astype(float), filt, time.perf_counter() - t0)
    # post-hoc repair: fewest species changes (Hamming cost), positions kept
    cost = 1.0 - jax.nn.one_hot(jnp.asarray(np.maximum(sp, 0)), k, dtype=jnp.float32)
    project_cells(cost, jnp.asarray(mask), mesh)  # compile apart from the timing
    t0 = time.perf_counter()
    res = jax.block_until_ready(project_cells(cost, jnp.asarray(mask), mesh))
    sec = time.perf_counter() - t0
    rep = np.where(mask, np.asarray(res.assignment), -1)
    ok = np.asarray(res.feasible, bool)
    rep = np.where(ok[:, None], rep, -1)
    out[METHODS[2]] = (ok.astype(float), rep, sec)
    methods = {}
    for name, (delivered, s_, seconds) in out.items():
        d = delivered > 0
        methods[name] = MethodDraws(
            delivered=delivered, species=s_, seconds=seconds,
            composition_l1=np.array([comp(s_[i], i) if d[i] else np.nan for i in range(b)]),
            balanced=np.array([float(d[i] and _Q[s_[i][mask[i]]].sum() == 0)
                               for i in range(b)]),
            changed=np.array([int(((s_[i] != sp[i]) & mask[i]).sum()) if d[i] else 0
                              for i in range(b)], float))
    return methods
