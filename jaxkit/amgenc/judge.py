"""An independent judge of generated glass cells: plausibility and design accuracy scored
with a potential that did not make the data (issue 64, part 2).

Which potential judges (:func:`judge_name`):

============================== ================================ ==========================
data (``dataset``, ``kind``)    made by                          judged by
============================== ================================ ==========================
``recipe``, silica              the toy pair potential           BKS (van Beest et al. 1990)
``recipe``, multi               the toy pair potential           Pedone et al. (2006), else
                                                                 Teter / Deng & Du (2019)
``published``, silica           BKS                              Pedone et al. (2006)
``published``, multi            Pedone et al. (2006)             Teter / Deng & Du (2019)
============================== ================================ ==========================

Teter / Deng & Du (:mod:`jaxkit.amgenc.teter`, ``"teter"``) is the Teter potential of
J. Du's oxide-glass simulations with the composition-dependent B-O term of Deng and Du
(J. Am. Ceram. Soc. 102, 2482, 2019): the one published potential here with boron. The
recipe's multi-component cells are judged by the composite ``"pedone+teter"``: each cell
by Pedone when Pedone has parameters for every species of its *target* (the held-out
cell it was generated for; a target by itself), else by Teter (the targets with B2O3),
so that a generated cell, its target and the target's twin always meet the same
potential. The toy pair potential (``"recipe"``) is still a judge one may name for the
published cells it did not make.
Cells with a species their judge has no parameters for (B under Pedone or BKS, a cation
other than Si under BKS, Ba or Zn under Teter) are not judged: their values are NaN and
counted apart.

What the judge does with a cell (:func:`judge_cells`, the potentials of
:mod:`jaxkit.amgenc.melt_quench` and :mod:`jaxkit.amgenc.teter` on
:mod:`jaxkit.kernels.md`, Coulomb by damped shifted force with cutoffs
``min(R, L_min / 2)``; the toy potential of :mod:`jaxkit.amgenc.potential`):

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
from .melt_quench import ALPHA, BKS_CHARGE, PEDONE, R_COUL, R_SHORT, bks_table, pedone_table
from .tables import ELEMENTS, MASS
from .teter import DENG_DU, boron_a, teter_table
from .teter import SPECIES as TETER_SPECIES

__all__ = ["COMPOSITE", "JUDGES", "MADE_BY", "JudgeResult", "judge_name", "judge_table",
           "judgeable", "judge_cells", "judged_energy", "members"]

#: the judges: name -> (what it is, the species it has parameters for)
JUDGES: dict[str, tuple[str, frozenset]] = {
    "bks": ("BKS (van Beest, Kramer & van Santen 1990) + 30-6 wall, DSF Coulomb",
            frozenset(BKS_CHARGE)),
    "pedone": ("Pedone et al. 2006 (Morse + r^-12 + DSF Coulomb)", frozenset(PEDONE)),
    "teter": ("Teter (Du) Buckingham with the composition-dependent B-O of Deng & Du 2019 "
              "(r^-30 core for Teter's short-range form, DSF Coulomb)", TETER_SPECIES),
    "pedone+teter": ("Pedone et al. 2006 where it has parameters for the target's species, "
                     "else Teter (Du) with Deng & Du 2019 boron", frozenset(PEDONE)
                     | TETER_SPECIES),
    "recipe": ("jaxkit's toy pair potential (not published)", frozenset(ELEMENTS)),
}
#: judges made of others: name -> its members, in the order a target tries them
COMPOSITE: dict[str, tuple[str, ...]] = {"pedone+teter": ("pedone", "teter")}
#: the potential that made each dataset's generated cells
MADE_BY = {("recipe", "silica"): "recipe", ("recipe", "multi"): "recipe",
           ("published", "silica"): "bks", ("published", "multi"): "pedone"}
_O = ELEMENTS.index("O")
_B = ELEMENTS.index("B")
_SHRINK = 0.97  # the smallest rescaling per round (cutoffs must fit every round's box)


def judge_name(dataset: str, kind: str, judge: str = "auto") -> str:
    """The potential that judges the cells of ``dataset`` / ``kind`` (module table), or
    ``judge`` itself when it is not ``"auto"``; never the one that made the data."""
    made = MADE_BY.get((dataset, kind))
    if made is None:
        raise ValueError(f"dataset/kind: no such data set {dataset!r}/{kind!r}")
    if judge == "auto":
        return {"recipe": "bks" if kind == "silica" else "pedone+teter",
                "bks": "pedone", "pedone": "teter"}[made]
    if judge not in JUDGES:
        raise ValueError(f"judge: must be 'auto' or one of {sorted(JUDGES)}; got {judge!r}")
    if made in members(judge):
        who = repr(judge) if judge == made else f"{judge!r} holds {made!r}, which"
        raise ValueError(f"judge: {who} made the {dataset}/{kind} cells; an independent "
                         "judge must be another potential")
    return judge


def members(name: str) -> tuple[str, ...]:
    """The potentials a judge uses: its :data:`COMPOSITE` members, or itself."""
    return COMPOSITE.get(name, (name,))


def judgeable(name: str, elements: np.ndarray) -> bool:
    """Whether potential ``name`` has parameters for every species of ``elements``."""
    el = np.asarray(elements)
    return bool(el.size and np.all(el >= 0)
                and {ELEMENTS[i] for i in np.unique(el)} <= JUDGES[name][1])


def judge_table(name: str, r_short: float = R_SHORT, r_coul: float = R_COUL,
                a_bo: float = DENG_DU["A1"]) -> md.PairTable:
    """The :class:`jaxkit.kernels.md.PairTable` of a published judge (``"bks"``,
    ``"pedone"`` or ``"teter"``; ``a_bo`` the Teter B-O ``A``,
    :func:`jaxkit.amgenc.teter.boron_a` of the cell, eV)."""
    if name == "bks":
        return bks_table(r_short, r_coul)
    if name == "pedone":
        return pedone_table(r_short, r_coul)
    if name == "teter":
        return teter_table(r_short, r_coul, ALPHA, a_bo)
    raise ValueError(f"judge: {name!r} has no pair table (the toy potential has its own; "
                     "a composite judge uses its members' tables)")


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
def _judge_batch(pos, box, el, mask, p_target, cut, a_bo, *, name, steps, rounds):
    base = None if name == "recipe" else judge_table(name)

    def one(x, b, e, m, pt, c, a):
        table = None if base is None else base._replace(r_short=jnp.minimum(R_SHORT, c),
                                                         r_coul=jnp.minimum(R_COUL, c))
        if name == "teter":  # the cell's own B-O A (Deng & Du 2019)
            ba = jnp.asarray(base.buck_a, x.dtype).at[_B, _O].set(a).at[_O, _B].set(a)
            table = table._replace(buck_a=ba)
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

    return jax.vmap(one)(pos, box, el, mask, p_target, cut, a_bo)


@dataclass(frozen=True, eq=False)
class JudgeResult:
    """What :func:`judge_cells` returns, one entry per input cell (NaN / None for a
    cell the judge has no parameters for).

    Attributes:
        name: the judge.
        judged: (n,) bool, the cells it could score.
        member: per cell, the potential that scored it (one of :func:`members`; None
            where not judged).
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
    member: list
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


def _route(name: str, cells: list, targets: list | None) -> list:
    """Per cell, the member of composite judge ``name`` that scores it: the first member
    with parameters for every species of the cell's target (``targets[i]``, element
    indices; the cell itself without targets), else the first with parameters for the
    cell's own species; None where no member has."""
    out = []
    for i, (_, _, el) in enumerate(cells):
        tgt = el if targets is None else targets[i]
        pick = next((m for m in members(name) if judgeable(m, tgt)), None)
        if pick is None or not judgeable(pick, el):
            pick = next((m for m in members(name) if judgeable(m, el)), None)
        out.append(pick)
    return out


def judge_cells(name: str, cells: list, *, steps: int, rounds: int = 0,
                p_target: np.ndarray | None = None,
                targets: list | None = None) -> JudgeResult:
    """Judge cells ((positions A, box edge or (3,) edges, elements) each) with potential
    ``name`` (module docstring): energies before and after ``steps`` FIRE steps at the
    fixed box, the pressure there, and with ``p_target`` (eV/A^3, one per cell) ``rounds``
    rounds of relaxation at that pressure.

    Cells are grouped by size bucket (:func:`jaxkit.amgenc.potential.padded_size`), one
    batched call per bucket, the batch padded to a multiple of 4 (calls with the same
    bucket counts share a compiled program). Float32. A composite judge
    (:data:`COMPOSITE`) scores each cell with the member its target routes it to
    (:func:`_route`), one call per member. The Teter judge takes each cell's own B-O
    ``A`` (:func:`jaxkit.amgenc.teter.boron_a`).

    Args:
        name: a key of :data:`JUDGES`.
        cells: the cells.
        steps: FIRE steps per relaxation (>= 1).
        rounds: box-rescaling rounds (0: no relaxation at pressure).
        p_target: target pressures (needed when ``rounds`` > 0).
        targets: per cell, the element indices of its target (only a composite judge
            reads them; None: each cell is its own target).

    Returns:
        The :class:`JudgeResult`.
    """
    if name not in JUDGES:
        raise ValueError(f"judge: must be one of {sorted(JUDGES)}; got {name!r}")
    if int(steps) < 1 or int(rounds) < 0:
        raise ValueError(f"steps must be >= 1 and rounds >= 0; got {steps}, {rounds}")
    if rounds and (p_target is None or len(p_target) != len(cells)):
        raise ValueError("p_target: one target pressure per cell is needed with rounds > 0")
    if targets is not None and len(targets) != len(cells):
        raise ValueError(f"targets: one per cell; got {len(targets)} for {len(cells)} cells")
    n = len(cells)
    if name in COMPOSITE:
        route = _route(name, cells, targets)
        out = JudgeResult(name, np.zeros(n, bool), [None] * n, *(np.full(n, np.nan)
                          for _ in range(3)), [None] * n, [None] * n, int(steps), int(rounds))
        for m in members(name):
            idx = [i for i in range(n) if route[i] == m]
            if not idx:
                continue
            sub = judge_cells(m, [cells[i] for i in idx], steps=steps, rounds=rounds,
                              p_target=None if p_target is None else
                              np.asarray(p_target)[idx])
            for k, i in enumerate(idx):
                out.judged[i], out.member[i] = sub.judged[k], sub.member[k]
                out.e_before[i], out.e_after[i] = sub.e_before[k], sub.e_after[k]
                out.pressure[i] = sub.pressure[k]
                out.relaxed[i], out.at_pressure[i] = sub.relaxed[k], sub.at_pressure[k]
        return out
    nan = np.full(n, np.nan)
    e0, e1, pr = nan.copy(), nan.copy(), nan.copy()
    relaxed, at_p = [None] * n, [None] * n
    ok = np.array([judgeable(name, el) for _, _, el in cells], bool)
    pt = np.zeros(n) if p_target is None else np.asarray(p_target, np.float64)
    a_bo = np.array([boron_a(el) if name == "teter" else 0.0 for _, _, el in cells])
    sizes = np.array([P.padded_size(len(el)) for _, _, el in cells], int)
    for size in np.unique(sizes[ok]) if ok.any() else []:
        idx = np.flatnonzero(ok & (sizes == size))
        b = -(-len(idx) // 4) * 4
        rows = [idx[i % len(idx)] for i in range(b)]
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
                           jnp.asarray(cut), jnp.asarray(a_bo[rows], jnp.float32),
                           name=name, steps=int(steps), rounds=int(rounds))
        a0, x1, a1, p1, xp, bp = (np.asarray(v, np.float64) for v in out)
        for i, j in enumerate(idx):
            k = len(cells[j][2])
            e0[j], e1[j], pr[j] = a0[i] / k, a1[i] / k, p1[i]
            relaxed[j] = x1[i, :k]
            if rounds:
                at_p[j] = (xp[i, :k], bp[i])
    member = [name if k else None for k in ok]
    return JudgeResult(name, ok, member, e0, e1, pr, relaxed, at_p, int(steps), int(rounds))


def judged_energy(name: str, pos: np.ndarray, box, elements: np.ndarray) -> float:
    """Energy per atom (eV) of one cell under judge ``name`` (no relaxation); NaN when
    the judge has no parameters for a species."""
    res = judge_cells(name, [(pos, box, elements)], steps=1)
    return float(res.e_before[0])
