"""An independent judge of generated glass cells: plausibility and design accuracy scored
with a potential that did not make the data (issue 64, part 2).

Which potential judges (:func:`judge_name`):

============================== ================================ ==========================
data (``dataset``, ``kind``)    made by                          judged by
============================== ================================ ==========================
``recipe``, silica              the toy pair potential           BKS (van Beest et al. 1990)
``recipe``, multi               the toy pair potential           Pedone et al. (2006)
``published``, silica           BKS                              Pedone et al. (2006)
``published``, multi            Pedone et al. (2006)             the toy pair potential
============================== ================================ ==========================

The last row is not a published judge: BKS has parameters for Si and O only, so no
second published potential here covers the modifiers; the toy potential did not make
those cells, which is all the row can say, and its rows carry the name ``recipe``.
Cells with a species the judge has no parameters for (B under Pedone or BKS, a cation
other than Si under BKS) are not judged: their values are NaN and counted apart.

What the judge does with a cell (:func:`judge_cells`, the potentials of
:mod:`jaxkit.amgenc.melt_quench` on :mod:`jaxkit.kernels.md`, Coulomb by damped shifted
force with cutoffs ``min(R, L_min / 2)``; the toy potential of
:mod:`jaxkit.amgenc.potential`):

* its energy per atom as generated (``e_before``, eV);
* ``steps`` FIRE steps at the fixed box (:func:`jaxkit.kernels.md.fire`): the relaxed
  positions and their energy per atom (``e_after``) and zero-temperature pressure
  ``P = W / (3 V)`` (``W`` the pair virial, :func:`jaxkit.kernels.md.virial`; eV/A^3);
* with a target pressure ``P*``: ``rounds`` rounds of FIRE then an isotropic rescaling of
  box and positions by ``s = 1 + (P - P*) / (3 B)`` (clipped to [0.97, 1.03]),
  ``B`` = :data:`jaxkit.amgenc.design.BULK_MODULUS`; the density of the last box is the
  judged density (``box_at_pressure``).

The plausibility after relaxation compares judge-relaxed generated cells with
judge-relaxed targets, the yardstick being the judge-relaxed twins (so a potential's own
offset from the data cancels); the design accuracy relaxes each generated cell at the
judged pressure of its target (the target relaxed at its box by the same judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import md

from . import potential as P
from .design import BULK_MODULUS
from .melt_quench import BKS_CHARGE, PEDONE, R_COUL, R_SHORT, bks_table, pedone_table
from .tables import ELEMENTS, MASS

__all__ = ["JUDGES", "MADE_BY", "JudgeResult", "judge_name", "judge_table", "judgeable",
           "judge_cells", "judged_energy"]

#: the judges: name -> (what it is, the species it has parameters for)
JUDGES: dict[str, tuple[str, frozenset]] = {
    "bks": ("BKS (van Beest, Kramer & van Santen 1990) + 30-6 wall, DSF Coulomb",
            frozenset(BKS_CHARGE)),
    "pedone": ("Pedone et al. 2006 (Morse + r^-12 + DSF Coulomb)", frozenset(PEDONE)),
    "recipe": ("jaxkit's toy pair potential (not published)", frozenset(ELEMENTS)),
}
#: the potential that made each dataset's generated cells
MADE_BY = {("recipe", "silica"): "recipe", ("recipe", "multi"): "recipe",
           ("published", "silica"): "bks", ("published", "multi"): "pedone"}
_O = ELEMENTS.index("O")
_SHRINK = 0.97  # the smallest rescaling per round (cutoffs must fit every round's box)


def judge_name(dataset: str, kind: str, judge: str = "auto") -> str:
    """The potential that judges the cells of ``dataset`` / ``kind`` (module table), or
    ``judge`` itself when it is not ``"auto"``; never the one that made the data."""
    made = MADE_BY.get((dataset, kind))
    if made is None:
        raise ValueError(f"dataset/kind: no such data set {dataset!r}/{kind!r}")
    if judge == "auto":
        return {"recipe": "bks" if kind == "silica" else "pedone",
                "bks": "pedone", "pedone": "recipe"}[made]
    if judge not in JUDGES:
        raise ValueError(f"judge: must be 'auto' or one of {sorted(JUDGES)}; got {judge!r}")
    if judge == made:
        raise ValueError(f"judge: {judge!r} made the {dataset}/{kind} cells; an independent "
                         "judge must be another potential")
    return judge


def judgeable(name: str, elements: np.ndarray) -> bool:
    """Whether potential ``name`` has parameters for every species of ``elements``."""
    el = np.asarray(elements)
    return bool(el.size and np.all(el >= 0)
                and {ELEMENTS[i] for i in np.unique(el)} <= JUDGES[name][1])


def judge_table(name: str, r_short: float = R_SHORT, r_coul: float = R_COUL) -> md.PairTable:
    """The :class:`jaxkit.kernels.md.PairTable` of a published judge (``"bks"`` or
    ``"pedone"``)."""
    if name == "bks":
        return bks_table(r_short, r_coul)
    if name == "pedone":
        return pedone_table(r_short, r_coul)
    raise ValueError(f"judge: {name!r} has no pair table (the toy potential has its own)")


def _force_energy(name, table, box, el, m):
    """``x -> (forces, energy)`` of one judge on one (padded) cell, box (3,) edges."""
    if name == "recipe":
        params = P._pair_params(el, m, box.dtype)
        edge = box[0]  # the toy potential is cubic-only (checked by the caller)

        def fe(x):
            e, g = jax.value_and_grad(P._energy)(x, edge, params)
            return -g * m[:, None], e
        return fe
    return lambda x: md.forces(x, box, el, m, table)


def _pressure(name, table, x, box, el, m):
    """Zero-temperature pressure (eV/A^3) of one padded cell."""
    vol = box[0] * box[1] * box[2]
    if name == "recipe":
        params = P._pair_params(el, m, box.dtype)
        e = lambda s: P._energy(x * s, box[0] * s, params)  # noqa: E731
        return -jax.grad(e)(jnp.asarray(1.0, x.dtype)) / (3.0 * vol)
    return md.virial(x, box, el, m, table) / (3.0 * vol)


@partial(jax.jit, static_argnames=("name", "steps", "rounds"))
def _judge_batch(pos, box, el, mask, p_target, cut, *, name, steps, rounds):
    base = None if name == "recipe" else judge_table(name)

    def one(x, b, e, m, pt, c):
        table = None if base is None else base._replace(r_short=jnp.minimum(R_SHORT, c),
                                                         r_coul=jnp.minimum(R_COUL, c))
        fe = _force_energy(name, table, b, e, m)
        e0 = fe(x)[1]
        x1, e1 = md.fire(x, b, m, fe, steps)
        p1 = _pressure(name, table, x1, b, e, m)

        def round_(carry, _):
            xr, br = carry
            xr, _ = md.fire(xr, br, m, _force_energy(name, table, br, e, m), steps)
            p = _pressure(name, table, xr, br, e, m)
            s = jnp.clip(1.0 + (p - pt) / (3.0 * BULK_MODULUS), _SHRINK, 2.0 - _SHRINK)
            return (xr * s, br * s), p

        (xp, bp), _ = jax.lax.scan(round_, (x1, b), None, length=rounds)
        return e0, x1, e1, p1, xp, bp

    return jax.vmap(one)(pos, box, el, mask, p_target, cut)


@dataclass(frozen=True, eq=False)
class JudgeResult:
    """What :func:`judge_cells` returns, one entry per input cell (NaN / None for a
    cell the judge has no parameters for).

    Attributes:
        name: the judge.
        judged: (n,) bool, the cells it could score.
        e_before, e_after: (n,) energy per atom (eV) as given and after the fixed-box
            FIRE relaxation.
        pressure: (n,) zero-temperature pressure after it (eV/A^3).
        relaxed: the fixed-box relaxed positions (A) per cell (None where not judged).
        at_pressure: (positions, box edges (3,)) after the rounds at the target pressure
            (None without target pressures or where not judged).
        steps, rounds: FIRE steps per relaxation and box-rescaling rounds.
    """

    name: str
    judged: np.ndarray
    e_before: np.ndarray
    e_after: np.ndarray
    pressure: np.ndarray
    relaxed: list
    at_pressure: list
    steps: int
    rounds: int

    def density(self, i: int, elements: np.ndarray) -> float:
        """Density (g/cm^3) of cell ``i`` in its box after the pressure rounds."""
        if self.at_pressure[i] is None:
            return float("nan")
        vol = float(np.prod(self.at_pressure[i][1])) * 1e-24
        return float(MASS[np.asarray(elements)].sum() / 6.02214076e23 / vol)


def _edges(box) -> np.ndarray:
    b = np.asarray(box, np.float64)
    return np.full(3, float(b)) if b.ndim == 0 else b.reshape(3)


def judge_cells(name: str, cells: list, *, steps: int, rounds: int = 0,
                p_target: np.ndarray | None = None) -> JudgeResult:
    """Judge cells ((positions A, box edge or (3,) edges, elements) each) with potential
    ``name`` (module docstring): energies before and after ``steps`` FIRE steps at the
    fixed box, the pressure there, and with ``p_target`` (eV/A^3, one per cell) ``rounds``
    rounds of relaxation at that pressure.

    Cells are grouped by size bucket (:func:`jaxkit.amgenc.potential.padded_size`), one
    batched call per bucket, the batch padded to a multiple of 4 (calls with the same
    bucket counts share a compiled program). Float32.

    Args:
        name: a key of :data:`JUDGES`.
        cells: the cells.
        steps: FIRE steps per relaxation (>= 1).
        rounds: box-rescaling rounds (0: no relaxation at pressure).
        p_target: target pressures (needed when ``rounds`` > 0).

    Returns:
        The :class:`JudgeResult`.
    """
    if name not in JUDGES:
        raise ValueError(f"judge: must be one of {sorted(JUDGES)}; got {name!r}")
    if int(steps) < 1 or int(rounds) < 0:
        raise ValueError(f"steps must be >= 1 and rounds >= 0; got {steps}, {rounds}")
    if rounds and (p_target is None or len(p_target) != len(cells)):
        raise ValueError("p_target: one target pressure per cell is needed with rounds > 0")
    n = len(cells)
    nan = np.full(n, np.nan)
    e0, e1, pr = nan.copy(), nan.copy(), nan.copy()
    relaxed, at_p = [None] * n, [None] * n
    ok = np.array([judgeable(name, el) for _, _, el in cells], bool)
    pt = np.zeros(n) if p_target is None else np.asarray(p_target, np.float64)
    sizes = np.array([P.padded_size(len(el)) for _, _, el in cells], int)
    for size in np.unique(sizes[ok]) if ok.any() else []:
        members = np.flatnonzero(ok & (sizes == size))
        b = -(-len(members) // 4) * 4
        rows = [members[i % len(members)] for i in range(b)]
        pos = np.zeros((b, size, 3), np.float32)
        el = np.full((b, size), _O, np.int32)
        mask = np.zeros((b, size), bool)
        box = np.zeros((b, 3), np.float32)
        for i, j in enumerate(rows):
            p, bx, e = cells[j]
            box[i] = _edges(bx)
            pos[i, :len(e)], el[i, :len(e)], mask[i, :len(e)] = np.mod(p, box[i]), e, True
            pos[i, len(e):] = 0.5 * box[i]
        if name == "recipe" and np.any(np.ptp(box, axis=1) > 1e-6 * box.max()):
            raise ValueError("cells: the toy potential judges cubic cells only")
        cut = 0.5 * box.min(1) * (_SHRINK ** rounds)
        out = _judge_batch(jnp.asarray(pos), jnp.asarray(box), jnp.asarray(el),
                           jnp.asarray(mask), jnp.asarray(pt[rows], jnp.float32),
                           jnp.asarray(cut), name=name, steps=int(steps), rounds=int(rounds))
        a0, x1, a1, p1, xp, bp = (np.asarray(v, np.float64) for v in out)
        for i, j in enumerate(members):
            k = len(cells[j][2])
            e0[j], e1[j], pr[j] = a0[i] / k, a1[i] / k, p1[i]
            relaxed[j] = x1[i, :k]
            if rounds:
                at_p[j] = (xp[i, :k], bp[i])
    return JudgeResult(name, ok, e0, e1, pr, relaxed, at_p, int(steps), int(rounds))


def judged_energy(name: str, pos: np.ndarray, box, elements: np.ndarray) -> float:
    """Energy per atom (eV) of one cell under judge ``name`` (no relaxation); NaN when
    the judge has no parameters for a species."""
    res = judge_cells(name, [(pos, box, elements)], steps=1)
    return float(res.e_before[0])
