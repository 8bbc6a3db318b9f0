"""The short-range pair potential of the AMGenC glass recipe and the relaxations built
on it: an overdamped-Langevin melt-quench and FIRE energy minimisation (Bitzek et al.,
PRL 97, 170201, 2006), in JAX: on the dense N x N minimum-image distance matrix for small
cells, and from :data:`LIST_FROM` padded atoms on a Verlet neighbour list (:data:`SKIN`)
that gives the same forces (:func:`_relax_core`).

Pair terms (:func:`pair_energy`), no Coulomb term:

* cation-O: Morse well ``D [(1 - exp(-a (r - r0)))^2 - 1]`` at the bond length ``r0`` of
  :data:`~jaxkit.amgenc.tables.BOND_LENGTHS`, ``a`` = :data:`MORSE_WIDTH`, depth ``D`` =
  :data:`MORSE_DEPTH` x ``z / CN`` (the Pauling bond strength);
* O-O: soft harmonic repulsion ``k/2 (sigma - r)^2`` for ``r < sigma`` = :data:`SIGMA_OO`;
* cation-cation: the same repulsion with ``sigma = min(0.93 (r0_i + r0_j), 3.2 A)``;
* a cosine switch takes every term smoothly to zero between :data:`SWITCH_ON` and
  :data:`CUTOFF`.

Cells are padded to size buckets (:func:`padded_size`) with an atom mask, so cells of
different N reuse one compiled program per bucket. Units: Angstrom, eV.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .tables import BOND_LENGTHS, ELEMENTS, N_ATOMS_RANGE, OXIDATION_STATES, TYPICAL_CN

__all__ = [
    "CUTOFF",
    "KT_MELT",
    "minimize",
    "padded_size",
    "pair_energy",
    "relax",
]

_O = ELEMENTS.index("O")
MORSE_DEPTH = 3.0  # eV per unit Pauling bond strength
MORSE_WIDTH = 3.0  # 1/A
SIGMA_OO = 2.6  # A
SIGMA_CC_SCALE, SIGMA_CC_MAX = 0.93, 3.2
K_REPULSION = 60.0  # eV/A^2
SWITCH_ON, CUTOFF = 4.5, 5.0  # A
KT_MELT = 0.4  # eV, melt temperature of the overdamped-Langevin stage
LANGEVIN_ETA = 0.001  # A^2/eV, mobility x time step
MAX_STEP = 0.1  # A, cap on one atom's displacement per step (both stages)


def _pair_tables() -> tuple[np.ndarray, ...]:
    """(K, K) tables of Morse (D, r0) and repulsion (sigma, on) between element kinds."""
    k = len(ELEMENTS)
    depth, r0, sigma, rep = (np.zeros((k, k)) for _ in range(4))
    for i, ei in enumerate(ELEMENTS):
        for j, ej in enumerate(ELEMENTS):
            if ei == "O" and ej == "O":
                sigma[i, j], rep[i, j] = SIGMA_OO, 1.0
            elif ei == "O" or ej == "O":
                c = ej if ei == "O" else ei
                depth[i, j] = MORSE_DEPTH * OXIDATION_STATES[c] / TYPICAL_CN[c]
                r0[i, j] = BOND_LENGTHS[c]
                sigma[i, j] = 1.0  # unused (rep = 0); keeps the table finite
            else:
                s = min(SIGMA_CC_SCALE * (BOND_LENGTHS[ei] + BOND_LENGTHS[ej]), SIGMA_CC_MAX)
                sigma[i, j], rep[i, j] = s, 1.0
    return depth, r0, sigma, rep


_DEPTH, _R0, _SIGMA, _REP = _pair_tables()


def padded_size(n: int) -> int:
    """Size bucket for ``n`` atoms: the next multiple of 128, at most 800."""
    return min(-(-int(n) // 128) * 128, N_ATOMS_RANGE[1]) if n <= 800 else int(n)


def _min_image(pos: jax.Array, box: jax.Array) -> jax.Array:
    d = pos[:, None, :] - pos[None, :, :]
    return d - box * jnp.round(d / box)


def _squared_distances(pos: jax.Array, box: jax.Array) -> jax.Array:
    """(N, N) squared minimum-image distances, one Cartesian component at a time ((N, N)
    planes rather than an (N, N, 3) array with a short last axis: several times faster
    on CPU, the same values as from :func:`_min_image`)."""
    r2 = 0.0
    for c in range(3):
        b = box if jnp.ndim(box) == 0 else box[c]  # cubic, or orthorhombic edges
        d = pos[:, None, c] - pos[None, :, c]
        d = d - b * jnp.round(d / b)
        r2 = r2 + d * d
    return r2


def _switch(r: jax.Array) -> jax.Array:
    t = jnp.clip((r - SWITCH_ON) / (CUTOFF - SWITCH_ON), 0.0, 1.0)
    return 0.5 * (1.0 + jnp.cos(jnp.pi * t))


def _pair_params(elements: jax.Array, mask: jax.Array, dtype) -> tuple[jax.Array, ...]:
    """Dense (N, N) pair parameters: pair mask, Morse depth and minimum, repulsion
    strength (k, 0 where no repulsion) and radius. Built once per relaxation."""
    n = elements.shape[0]
    pair = mask[:, None] & mask[None, :] & ~jnp.eye(n, dtype=bool)
    ei, ej = elements[:, None], elements[None, :]
    depth = jnp.asarray(_DEPTH, dtype)[ei, ej]
    r0 = jnp.asarray(_R0, dtype)[ei, ej]
    k = K_REPULSION * jnp.asarray(_REP, dtype)[ei, ej]
    sigma = jnp.asarray(_SIGMA, dtype)[ei, ej]
    return pair, depth, r0, k, sigma


def _energy(pos: jax.Array, box: jax.Array, params: tuple[jax.Array, ...]) -> jax.Array:
    pair, depth, r0, k, sigma = params
    r2 = _squared_distances(pos, box)
    r = jnp.sqrt(jnp.where(pair, r2, 1.0))  # safe gradient on the diagonal and padding
    morse = depth * (jnp.square(1.0 - jnp.exp(-MORSE_WIDTH * (r - r0))) - 1.0)
    soft = 0.5 * k * jnp.square(jnp.maximum(sigma - r, 0.0))
    e = (morse + soft) * _switch(r)
    return 0.5 * jnp.sum(jnp.where(pair, e, 0.0))


def pair_energy(pos: jax.Array, box: jax.Array, elements: jax.Array,
                mask: jax.Array) -> jax.Array:
    """Total short-range pair energy (eV) of the masked atoms; see the module docstring.

    ``pos`` (N, 3) A, ``box`` cubic edge, ``elements`` (N,) indices into :data:`ELEMENTS`,
    ``mask`` (N,) bool of real (non-padding) atoms. Differentiable with ``jax.grad``.
    """
    pos = jnp.asarray(pos)
    return _pair_energy(pos, jnp.asarray(box, pos.dtype), jnp.asarray(elements),
                        jnp.asarray(mask))


@jax.jit
def _pair_energy(pos, box, elements, mask):
    # jitted: one compilation per shape instead of one per primitive when called eagerly
    return _energy(pos, box, _pair_params(elements, mask, pos.dtype))


def _cap(step: jax.Array, max_step: float) -> jax.Array:
    norm = jnp.linalg.norm(step, axis=-1, keepdims=True)
    return step * jnp.minimum(1.0, max_step / jnp.maximum(norm, 1e-12))


#: Verlet skin (A) of the neighbour list and the list's capacity (neighbours per atom).
#: One step moves an atom by at most :data:`MAX_STEP`, so a pair distance changes by at
#: most ``2 MAX_STEP`` per step and a list of the pairs within ``CUTOFF + SKIN`` rebuilt
#: every ``floor(SKIN / (2 MAX_STEP))`` steps holds every pair within ``CUTOFF`` (where
#: the switch is non-zero) at every step in between: the forces are those of the dense
#: sum. A cell whose list would exceed the capacity is relaxed again with the dense sum.
SKIN = 2.0
LIST_CAPACITY = 192
#: padded sizes from which the relaxations use the neighbour list (dense below)
LIST_FROM = 256
_REBUILD = int(SKIN // (2 * MAX_STEP) + 1e-9)


def _build_list(pos, box, pair, capacity: int):
    """Neighbours within ``CUTOFF + SKIN`` of every atom: (idx (N, M) int, valid (N, M)
    bool, largest row count); rows keep their first ``capacity`` neighbours (overflow
    when the count exceeds it)."""
    n = pos.shape[0]
    within = pair & (_squared_distances(pos, box) < (CUTOFF + SKIN) ** 2)
    count = jnp.cumsum(within, axis=1, dtype=jnp.int32)
    # the k-th neighbour of a row is the first column where its running count reaches k
    ks = jnp.arange(1, capacity + 1, dtype=jnp.int32)
    idx = jax.vmap(lambda c: jnp.searchsorted(c, ks, side="left"))(count)
    valid = ks[None, :] <= count[:, -1:]
    idx = jnp.where(valid, idx, jnp.arange(n)[:, None]).astype(jnp.int32)
    return idx, valid, jnp.max(count[:, -1])


def _pair_terms(r, depth, r0, k, sigma):
    morse = depth * (jnp.square(1.0 - jnp.exp(-MORSE_WIDTH * (r - r0))) - 1.0)
    soft = 0.5 * k * jnp.square(jnp.maximum(sigma - r, 0.0))
    return (morse + soft) * _switch(r)


def _list_grad(x, box, elements, nbr):
    """dE/dx (N, 3) from the neighbour list ``nbr`` = (idx, valid): each pair sits in
    both atoms' rows, so atom i's gradient is the sum over its own row."""
    idx, valid = nbr
    d = x[idx] - x[:, None, :]
    d = d - box * jnp.round(d / box)
    r = jnp.sqrt(jnp.where(valid, jnp.sum(d * d, axis=-1), 1.0))
    ei, ej = elements[:, None], elements[idx]
    dt = x.dtype
    p = (jnp.asarray(_DEPTH, dt)[ei, ej], jnp.asarray(_R0, dt)[ei, ej],
         K_REPULSION * jnp.asarray(_REP, dt)[ei, ej], jnp.asarray(_SIGMA, dt)[ei, ej])
    de = jax.grad(lambda rr: jnp.sum(_pair_terms(rr, *p)))(r)  # elementwise e'(r)
    w = jnp.where(valid, de / r, 0.0)
    return -jnp.sum(w[..., None] * d, axis=1)


def _relax_core(pos, box, elements, mask, key, *, n_hold, n_quench, n_min, capacity=0):
    """Melt-quench then FIRE (see :func:`relax`); ``capacity`` > 0 uses the neighbour
    list (:data:`SKIN`) of that capacity, 0 the dense sum. Returns (positions, energy,
    the largest neighbour count met (0 for the dense sum))."""
    m = mask[:, None].astype(pos.dtype)
    params = _pair_params(elements, mask, pos.dtype)
    pair = params[0]
    dense_grad = jax.grad(_energy)

    if capacity:
        def grad(x, nbr):
            return _list_grad(x, box, elements, nbr[:2])

        def refresh(x, nbr, i):
            # rebuilt at step 0 and every _REBUILD steps; nbr[2] the largest count so far
            def build(_):
                idx, valid, cnt = _build_list(x, box, pair, capacity)
                return idx, valid, jnp.maximum(nbr[2], cnt)
            return jax.lax.cond(i % _REBUILD == 0, build, lambda _: nbr, None)

        n = pos.shape[0]
        nbr0 = (jnp.zeros((n, capacity), jnp.int32), jnp.zeros((n, capacity), bool),
                jnp.zeros((), jnp.int32))
    else:
        def grad(x, nbr):
            return dense_grad(x, box, params)

        def refresh(x, nbr, i):
            return nbr

        nbr0 = (jnp.zeros((), jnp.int32),) * 3

    def langevin(carry, inp):
        x, nbr = carry
        kt, k, i = inp
        nbr = refresh(x, nbr, i)
        noise = jax.random.normal(k, x.shape, x.dtype)
        step = -LANGEVIN_ETA * grad(x, nbr) + jnp.sqrt(2.0 * LANGEVIN_ETA * kt) * noise
        return (jnp.mod(x + _cap(step, MAX_STEP) * m, box), nbr), None

    n_lang = n_hold + n_quench
    kts = jnp.concatenate([jnp.full((n_hold,), KT_MELT),
                           jnp.linspace(KT_MELT, 0.0, n_quench)]).astype(pos.dtype)
    keys = jax.random.split(key, n_lang)
    (pos, nbr), _ = jax.lax.scan(langevin, (pos, nbr0), (kts, keys, jnp.arange(n_lang)))

    # FIRE (Bitzek et al. 2006) with unit masses and a per-atom displacement cap.
    dt0, dt_max, n_delay, f_inc, f_dec, a0, f_a = 0.02, 0.1, 5, 1.1, 0.5, 0.1, 0.99

    def fire(state, i):
        x, v, dt, a, n_pos, nbr = state
        nbr = refresh(x, nbr, i)
        f = -grad(x, nbr) * m
        p = jnp.sum(f * v)
        fn = jnp.linalg.norm(f) + 1e-12
        vn = jnp.linalg.norm(v)
        v = (1.0 - a) * v + a * vn * f / fn
        up = p > 0
        n_pos = jnp.where(up, n_pos + 1, 0)
        grow = up & (n_pos > n_delay)
        dt = jnp.where(grow, jnp.minimum(dt * f_inc, dt_max), jnp.where(up, dt, dt * f_dec))
        a = jnp.where(grow, a * f_a, jnp.where(up, a, a0))
        v = jnp.where(up, v, 0.0)
        v = v + dt * f
        x = jnp.mod(x + _cap(dt * v, MAX_STEP) * m, box)
        return (x, v, dt, a, n_pos, nbr), None

    zero = jnp.zeros((), pos.dtype)
    state = (pos, jnp.zeros_like(pos), zero + dt0, zero + a0, jnp.zeros((), jnp.int32), nbr)
    (pos, *_, nbr), _ = jax.lax.scan(fire, state, jnp.arange(n_min))
    return pos, _energy(pos, box, params), nbr[2]


_relax_jit = partial(jax.jit, static_argnames=("n_hold", "n_quench", "n_min",
                                               "capacity"))(_relax_core)


def list_capacity(size: int) -> int:
    """The neighbour-list capacity the relaxations use for a padded size (0: dense)."""
    return LIST_CAPACITY if size >= LIST_FROM and size > LIST_CAPACITY else 0


def _relax_padded(pos, box, elements, mask, key, *, n_hold, n_quench, n_min):
    """:func:`_relax_core` with the neighbour list from :data:`LIST_FROM` atoms; a cell
    whose list overflows is relaxed again with the dense sum. Returns (positions,
    energy)."""
    cap = list_capacity(int(pos.shape[0]))
    out, energy, count = _relax_jit(pos, box, elements, mask, key, n_hold=n_hold,
                                    n_quench=n_quench, n_min=n_min, capacity=cap)
    if cap and int(count) > cap:
        out, energy, _ = _relax_jit(pos, box, elements, mask, key, n_hold=n_hold,
                                    n_quench=n_quench, n_min=n_min, capacity=0)
    return out, energy


def relax(positions: np.ndarray, box: float, elements: np.ndarray, *, seed: int = 0,
          steps: int = 6000, min_steps: int = 500) -> tuple[np.ndarray, float]:
    """Melt-quench (``steps`` Langevin steps: 1/3 at :data:`KT_MELT`, 2/3 linear cooling
    to 0) then ``min_steps`` FIRE steps. Returns (positions in [0, box), energy in eV).
    """
    n = int(elements.shape[0])
    if steps < 2 or min_steps < 0:
        raise ValueError(f"steps must be >= 2 and min_steps >= 0; got {steps}, {min_steps}")
    size = padded_size(n)
    pos = np.zeros((size, 3), np.float32)
    pos[:n] = positions
    el = np.full(size, _O, np.int32)
    el[:n] = elements
    mask = np.arange(size) < n
    n_hold = steps // 3
    out, energy = _relax_padded(jnp.asarray(pos), jnp.float32(box), jnp.asarray(el),
                                jnp.asarray(mask), jax.random.key(seed),
                                n_hold=n_hold, n_quench=steps - n_hold, n_min=int(min_steps))
    return np.asarray(out[:n], dtype=np.float64), float(energy)


def minimize(positions: np.ndarray, box: float, elements: np.ndarray, *,
             steps: int = 300) -> tuple[np.ndarray, float]:
    """FIRE energy minimisation alone (no melt-quench): ``steps`` FIRE steps of the pair
    potential from the given positions, species unchanged. Used to post-process
    generated cells. Returns (positions in [0, box), energy in eV)."""
    n = int(elements.shape[0])
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    size = padded_size(n)
    pos = np.zeros((size, 3), np.float32)
    pos[:n] = np.mod(positions, box)
    el = np.full(size, _O, np.int32)
    el[:n] = elements
    mask = np.arange(size) < n
    out, energy = _relax_padded(jnp.asarray(pos), jnp.float32(box), jnp.asarray(el),
                                jnp.asarray(mask), jax.random.key(0),  # no Langevin step uses it
                                n_hold=0, n_quench=0, n_min=int(steps))
    return np.asarray(out[:n], dtype=np.float64), float(energy)
