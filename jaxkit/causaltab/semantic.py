"""Semantic environments: domain-grounded SCMs with named variables built from expert
networks shipped in ``jaxkit/data/networks/`` (see ``jaxkit/data/NETWORKS.md``).

* BIF networks (sachs, asia, child, ...): the expert structure **and** its conditional
  probability tables. Data are drawn by ancestral sampling of the discrete network
  (states coded ``0..k-1``); an intervention ``do(X = s)`` fixes a node to a state drawn
  uniformly per environment (hard, known targets), so the semantics of the expert model
  decide every downstream effect.
* dagitty DAGs (Polzer 2012, Shrier 2008): the structure only; continuous data from the
  prior's mechanisms on that structure (:func:`jaxkit.kernels.sem.simulate_scm`).

Plus the real Sachs et al. (2005) measurements that jaxkit ships (``jaxkit.data.sachs``).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import sem

__all__ = ["Network", "BIF_NETWORKS", "DAGITTY_NETWORKS", "load_network", "sample_bif",
           "sample_structure"]

BIF_NETWORKS = ("sachs", "asia", "child", "alarm", "insurance")
DAGITTY_NETWORKS = ("Polzer_2012", "Shrier_2008")


@dataclass(frozen=True)
class Network:
    """An expert network: ``names``, ``adj`` (``adj[i, j]``: ``names[j] -> names[i]``),
    and for BIF networks ``states[v]`` (state names) and ``cpt[v]`` (array of shape
    ``(*parent cardinalities, k_v)`` over ``parents[v]`` in BIF order)."""

    name: str
    names: tuple[str, ...]
    adj: np.ndarray
    parents: tuple[tuple[int, ...], ...]
    states: tuple[tuple[str, ...], ...] | None = None
    cpt: tuple[np.ndarray, ...] | None = None


def _read(fname: str) -> str:
    f = resources.files("jaxkit.data") / "networks" / fname
    raw = f.read_bytes()
    return gzip.decompress(raw).decode() if fname.endswith(".gz") else raw.decode()


def _parse_bif(name: str, text: str) -> Network:
    var_re = re.compile(r"variable\s+(\S+)\s*\{[^}]*?\[\s*(\d+)\s*\]\s*\{([^}]*)\}", re.S)
    names, states = [], []
    for m in var_re.finditer(text):
        names.append(m.group(1))
        states.append(tuple(s.strip() for s in m.group(3).split(",")))
    idx = {n: i for i, n in enumerate(names)}
    d = len(names)
    parents: list[tuple[int, ...]] = [()] * d
    cpts: list[np.ndarray | None] = [None] * d
    prob_re = re.compile(r"probability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*))?\)\s*\{(.*?)\}", re.S)
    for m in prob_re.finditer(text):
        child = idx[m.group(1).strip()]
        pa = tuple(idx[p.strip()] for p in m.group(2).split(",")) if m.group(2) else ()
        body = m.group(3)
        k = len(states[child])
        shape = tuple(len(states[p]) for p in pa) + (k,)
        table = np.zeros(shape)
        if "table" in body and not pa:
            vals = [float(v) for v in re.findall(r"[-+0-9.eE]+", body.split("table", 1)[1])]
            table[:] = np.asarray(vals[:k])
        else:
            for row in re.finditer(r"\(([^)]*)\)\s*([^;]*);", body):
                key = tuple(states[p].index(s.strip()) for p, s in
                            zip(pa, row.group(1).split(","), strict=True))
                table[key] = [float(v) for v in row.group(2).split(",")]
        parents[child] = pa
        cpts[child] = table / table.sum(axis=-1, keepdims=True)
    adj = np.zeros((d, d), bool)
    for c, pa in enumerate(parents):
        adj[c, list(pa)] = True
    return Network(name, tuple(names), adj, tuple(parents), tuple(states), tuple(cpts))


def _parse_dagitty(name: str, text: str) -> Network:
    names = re.findall(r"^(\w+)\s*\[", text, re.M)
    idx = {n: i for i, n in enumerate(names)}
    d = len(names)
    adj = np.zeros((d, d), bool)
    for a, b in re.findall(r"^(\w+)\s*->\s*(\w+)", text, re.M):
        adj[idx[b], idx[a]] = True
    parents = tuple(tuple(np.flatnonzero(adj[i]).tolist()) for i in range(d))
    return Network(name, tuple(names), adj, parents)


def load_network(name: str) -> Network:
    """A shipped network by name (``BIF_NETWORKS`` or ``DAGITTY_NETWORKS``)."""
    if name in BIF_NETWORKS:
        return _parse_bif(name, _read(f"{name}.bif.gz"))
    if name in DAGITTY_NETWORKS:
        return _parse_dagitty(name, _read(f"{name}.txt"))
    raise ValueError(f"unknown network {name!r}; shipped: {BIF_NETWORKS + DAGITTY_NETWORKS}")


def _topo(net: Network) -> list[int]:
    order, done = [], set()
    while len(order) < len(net.names):
        for v in range(len(net.names)):
            if v not in done and all(p in done for p in net.parents[v]):
                order.append(v)
                done.add(v)
    return order


def sample_bif(rng: np.random.Generator, net: Network, n_obs: int, n_int: int = 0, *,
               n_envs: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ancestral samples of a BIF network: ``n_obs`` observational rows, then ``n_int``
    rows spread over ``n_envs`` (default ``d``) atomic hard interventions, environment
    ``k`` setting node ``perm[k mod d]`` to a uniformly drawn state.

    Returns:
        ``(x, targets)``: state codes ``(n, d)`` as float64 and the per-row target mask.
    """
    if net.cpt is None:
        raise ValueError(f"network {net.name!r} has no probability tables")
    d = len(net.names)
    n = n_obs + n_int
    n_envs = d if n_envs is None else n_envs
    perm = rng.permutation(d)
    env = np.full(n, -1)
    env[n_obs:] = np.arange(n_int) % n_envs
    tgt = np.zeros((n, d), bool)
    tgt[n_obs:, :] = np.eye(d, dtype=bool)[perm[env[n_obs:] % d]]
    do_state = np.asarray([[rng.integers(len(net.states[v])) for v in range(d)]
                           for _ in range(n_envs)])
    x = np.zeros((n, d), np.int64)
    for v in _topo(net):
        pa = net.parents[v]
        probs = net.cpt[v][tuple(x[:, p] for p in pa)] if pa else np.broadcast_to(
            net.cpt[v], (n, net.cpt[v].shape[-1]))
        u = rng.random((n, 1))
        x[:, v] = np.minimum((np.cumsum(probs, axis=1) < u).sum(axis=1), probs.shape[1] - 1)
        hit = tgt[:, v]
        x[hit, v] = do_state[env[hit], v]
    return x.astype(np.float64), tgt


def sample_structure(key, net: Network, n_obs: int, n_int: int = 0, *, mechanism: int = 1,
                     noise: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Continuous data on a network's structure from the prior's mechanisms
    (``MECHANISMS[mechanism]``, ``PRIOR_NOISES[noise]``); ``n_int`` rows over ``d``
    atomic hard interventions (known targets). Returns ``(x, targets)``."""
    d = len(net.names)
    n = n_obs + n_int
    adj = jnp.asarray(net.adj)
    k_p, k_s, k_t = jax.random.split(key, 3)
    params = sem.init_mechanisms(k_p, adj)
    perm = jax.random.permutation(k_t, d)
    targets = jnp.zeros((d, d), bool).at[jnp.arange(d), perm].set(True)
    r = jnp.arange(n)
    env = jnp.where(r >= n_obs, (r - n_obs) % d, -1)
    x = sem.simulate_scm(k_s, adj, params, mechanism=jnp.int32(mechanism),
                         noise=jnp.int32(noise), active=jnp.ones(d, bool),
                         rows=jnp.ones(n, bool), env=env, targets=targets,
                         itype=jnp.int32(0))
    tgt = (env >= 0)[:, None] & targets[jnp.clip(env, 0, d - 1)]
    return np.asarray(x, np.float64), np.asarray(tgt)
