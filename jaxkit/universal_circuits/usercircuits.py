"""Class circuits, their intersection, calibrated universality and surgery on the user's
own activations with labels (``--set activations=DIR`` with ``DIR/labels.npy``).

The replacement model replaces every layer of each model by the transcoder and reads
its logits from the model's last site through the model's head, so a circuit needs only
the head: per model, either the user's own head, ``DIR/<model>_head.safetensors``
(``kernel (d_L, C)`` as flax writes it or ``weight (C, d_L)`` as torch writes it, and
``bias (C,)``), or, without one, a linear read-out of the last site fitted to
``labels.npy`` on the training rows (ridge least squares on one-hot targets: no gradient).

Rows: every ``test_every``-th row is held out (intersections, universality and surgery
are measured there); circuits are found on up to ``discovery_per_class`` training rows
of each class. Surgery on activations cannot retrain the user's receiver without a
class, so the class is removed from the receiver's *head* (its column replaced by the
mean of the others: the head forgets it) and written back from the giver's circuit
(:func:`jaxkit.kernels.crosscoder.surgery_head`); the control is a random gate of the
circuit's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.io import DataError

from . import circuits as C
from . import surgery as S
from . import universality as U
from .results import SurgeryEval, UserCircuits, UserFit, UserSurgery

__all__ = ["SiteClassifier", "check_labels", "load_head", "fit_head", "user_circuits",
           "markdown"]


@dataclass(frozen=True)
class SiteClassifier:
    """A user's model seen through its recorded sites and its linear head.

    The rows handed to it (``x``) are every model's sites side by side; ``offset`` is
    where this model's begin. ``sites`` splits them, ``rest`` applies the head to the
    last site (the only site the replacement model hands it), ``params`` is
    ``{"W": (d_L, C), "b": (C,)}``.
    """

    d_sites: tuple[int, ...]
    offset: int

    @property
    def n_layers(self) -> int:
        return len(self.d_sites) - 1

    def sites(self, params, x):
        out, o = [], self.offset
        for d in self.d_sites:
            out.append(x[:, o:o + d])
            o += d
        return out

    def first_site(self, x):
        return x[:, self.offset:self.offset + self.d_sites[0]]

    def rest(self, params, t, h):
        return h @ params["W"] + params["b"]

    def logits(self, params, x):
        return self.rest(params, self.n_layers, self.sites(params, x)[-1])

    def head(self, params):
        return params["W"], params["b"]

    def with_head(self, params, W, b):
        return {"W": jnp.asarray(W), "b": jnp.asarray(b)}


def check_labels(directory, labels, n: int, per_class: int = 2) -> np.ndarray:
    """The user's labels as ``(n,)`` ints, every class in ``0..C-1`` with ``per_class``
    rows.

    Raises:
        DataError: one line naming ``labels.npy``.
    """
    y = np.asarray(labels)
    where = f"`activations` {directory}: labels.npy"
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DataError(f"{where} must be a 1-D integer array; got {y.dtype} {y.shape}")
    if len(y) != n:
        raise DataError(f"{where} holds {len(y)} labels but the activation files hold {n} "
                        "rows")
    if y.min() < 0:
        raise DataError(f"{where} holds a negative label ({int(y.min())})")
    counts = np.bincount(y)
    if len(counts) < 2 or counts.min() < per_class:
        raise DataError(f"{where}: every class 0..{len(counts) - 1} needs at least "
                        f"{per_class} rows; counts {counts.tolist()}")
    return y.astype(np.int64)


def load_head(path: Path, d: int, n_classes: int) -> dict:
    """A user's linear head from a safetensors file (module docstring).

    Raises:
        DataError: one line naming the file (missing tensors, wrong shapes).
    """
    from safetensors.numpy import load_file

    try:
        t = load_file(str(path))
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's
        raise DataError(f"{path}: not a readable safetensors file ({e})") from None
    if "kernel" in t:
        W = np.asarray(t["kernel"], np.float32)
    elif "weight" in t:
        W = np.asarray(t["weight"], np.float32).T
    else:
        raise DataError(f"{path}: no 'kernel' (d, C) or 'weight' (C, d) tensor; it holds "
                        f"{sorted(t)}")
    b = np.asarray(t.get("bias", np.zeros(W.shape[-1])), np.float32)
    if W.shape != (d, n_classes) or b.shape != (n_classes,):
        raise DataError(f"{path}: head of shape {W.shape} / bias {b.shape}; want ({d}, "
                        f"{n_classes}) / ({n_classes},) for the model's last site")
    return {"W": W, "b": b}


def fit_head(h: np.ndarray, y: np.ndarray, n_classes: int, ridge: float) -> dict:
    """Ridge least squares of one-hot targets on the last site ``h`` (no gradient):
    ``W = (Hc^T Hc + lam I)^-1 Hc^T Yc`` on centred ``H, Y``, ``lam`` = ``ridge`` times the
    mean squared row norm; ``b`` restores the means."""
    h = np.asarray(h, np.float64)
    Y = np.eye(n_classes)[y]
    mh, my = h.mean(0), Y.mean(0)
    hc, yc = h - mh, Y - my
    lam = ridge * max(float((hc ** 2).sum(1).mean()), 1e-12)
    W = np.linalg.solve(hc.T @ hc + lam * np.eye(h.shape[1]), hc.T @ yc)
    return {"W": W.astype(np.float32), "b": (my - mh @ W).astype(np.float32)}


def user_circuits(key, directory, models, spec, params, sites, y, *, k: int, keep_frac: float,
                  n_sizes: int, n_random: int, tau: float, alpha: float, test_every: int,
                  per_class: int, classes, ridge: float) -> UserCircuits:
    """Circuits, intersections, universality and surgery on the user's rows.

    Args:
        key: the random subsets' and gates' key.
        directory: the user's folder (for ``<model>_head.safetensors``).
        models: the models' names (their subfolders), in the transcoder's order.
        spec, params: the transcoder trained on the aligned rows (no seed axis).
        sites: ``sites[m][t]`` ``(n, d)`` of every row.
        y: :func:`check_labels`.
        k, keep_frac, n_sizes, n_random, tau, alpha: as the pipeline's settings.
        test_every: every ``test_every``-th row is held out.
        per_class: discovery rows per class.
        classes: the classes to write back by surgery.
        ridge: the surgery solve's and the fitted head's ridge.

    Returns:
        A :class:`.results.UserCircuits`: ``heads`` (per model "user" or "fitted"),
        ``head_acc`` (M,) on the held-out rows, ``circuit_sizes`` (M, C), intersection
        statistics of :func:`.circuits.intersection_stats`, ``universality`` of
        :func:`.universality.calibrated_universal`, ``surgery`` {class: recall / other
        before, after, random gate}.
    """
    directory = Path(directory)
    n_cls = int(y.max()) + 1
    x = np.concatenate([np.asarray(a, np.float32) for row in sites for a in row], axis=1)
    offs = np.cumsum([0] + [sum(a.shape[1] for a in row) for row in sites])[:-1]
    clfs = [SiteClassifier(tuple(a.shape[1] for a in row), int(o))
            for row, o in zip(sites, offs, strict=True)]
    test = np.arange(len(y)) % test_every == 0
    tr = np.flatnonzero(~test)
    heads, kinds = [], []
    for m, (row, clf) in enumerate(zip(sites, clfs, strict=True)):
        f = directory / f"{models[m]}_head.safetensors"
        if f.is_file():
            heads.append(load_head(f, clf.d_sites[-1], n_cls))
            kinds.append("user")
        else:
            heads.append(fit_head(np.asarray(row[-1])[tr], y[tr], n_cls, ridge))
            kinds.append("fitted")
    ps = [jax.tree.map(jnp.asarray, h) for h in heads]
    xt, yt = x[test], y[test]
    head_acc = [float(np.mean(S.predictions(c, p, xt) == yt)) for c, p in zip(clfs, ps,
                                                                                strict=True)]
    disc = np.concatenate([tr[y[tr] == c][:per_class] for c in range(n_cls)])
    circ = C.find_circuits(params, spec, clfs, ps, x[disc], y[disc], k=k, keep_frac=keep_frac,
                           n_sizes=n_sizes)
    R, valid = U.read_correlation(params, spec, [[a[test] for a in row] for row in sites])
    un = U.calibrated_universal(R, valid, alpha, np.random.default_rng(
        np.asarray(jax.random.key_data(key)).ravel().tolist()))
    st = C.intersection_stats(key, params, spec, clfs, ps, circ, xt, yt, k=k,
                              n_random=n_random, tau=tau, universal=un.universal)
    surg = {}
    rng = np.random.default_rng(np.asarray(jax.random.key_data(jax.random.fold_in(key, 1)))
                                .ravel().tolist())
    N = spec.n_depths * spec.n_latents
    for c in classes:
        if c >= n_cls:
            continue
        W, b = (np.asarray(a) for a in clfs[1].head(ps[1]))
        others = np.arange(n_cls) != c
        W0, b0 = W.copy(), b.copy()
        W0[:, c], b0[c] = W[:, others].mean(1), b[others].mean()
        forgot = clfs[1].with_head(ps[1], W0, b0)
        gate = circ.gates[0, c]
        rnd = np.zeros(N, np.float32)
        rnd[rng.choice(N, int(gate.sum()), replace=False)] = 1.0
        res = {"before": S.evaluate(S.predictions(clfs[1], forgot, xt), yt, c, n_cls)}
        for tag, g in (("after", gate), ("random", rnd)):
            new = S.transfer(params, spec, 0, 1, c, g, clfs, [ps[0], forgot], ridge)
            res[tag] = S.evaluate(S.predictions(clfs[1], new, xt), yt, c, n_cls)
        surg[c] = UserSurgery(size=int(gate.sum()), **{
            t: SurgeryEval(recall=v.recall, other=v.other) for t, v in res.items()})
    return UserCircuits(heads=kinds, head_acc=head_acc, circuit_sizes=circ.sizes,
                        universality=un, shared=st.shared, ratio=st.ratio,
                        random_ratio=st.random_ratio, top_ratio=st.top_ratio,
                        one_only=st.one_only, empty=st.empty, surgery=surg)


def markdown(res: UserCircuits, models) -> str:
    """The report section of :func:`user_circuits`."""
    from jaxkit.report import markdown_table

    names = list(models)[:2]
    C = res.ratio.shape[-1]
    rows = [[c, int(res.shared[c]), *(int(res.circuit_sizes[m, c]) for m in range(2)),
             *(float(res.ratio[m, c]) for m in range(2)),
             *(float(res.random_ratio[m, c]) for m in range(2)),
             *(float(res.top_ratio[m, c]) for m in range(2))] for c in range(C)]
    u = res.universality
    out = ["### Class circuits on your activations (labels.npy)", "",
           "Heads: " + ", ".join(f"{n} {h} (held-out accuracy {a:.3f})" for n, h, a in
                                 zip(names, res.heads, res.head_acc, strict=False))
           + "; 'fitted': a ridge read-out of the last site fitted to your labels, 'user': "
           "your <model>_head.safetensors.", "",
           markdown_table(["class", "shared", *(f"{n} circuit" for n in names),
                           *(f"{n} ratio" for n in names), *(f"{n} random" for n in names),
                           *(f"{n} top-|I|" for n in names)], rows), "",
           f"Universal latents (calibrated against the shuffled null): "
           f"{float(u.valid_universal_fraction):.3f} of the latents both models read "
           f"(the shuffled pairing's rate {float(u.null_fraction):.3f}).", ""]
    if res.surgery:
        out += ["Surgery (the class removed from the second model's head, written back from "
                "the first model's circuit; recall of the class / other classes' accuracy on "
                "the held-out rows):", "",
                markdown_table(["class", "circuit size", "head without it", "after surgery",
                                "random gate"],
                               [[c, s.size, *(f"{e.recall:.3f} / {e.other:.3f}"
                                              for e in (s.before, s.after, s.random))]
                                for c, s in res.surgery.items()]), ""]
    return "\n".join(out)


def has_labels(out_dir: Path) -> bool:
    """Whether the user's activation store under ``out_dir`` carries labels."""
    import json

    man = Path(out_dir) / "stores" / "user" / "sites.json"
    return man.is_file() and bool(json.loads(man.read_text()).get("labels"))


def circuits_of_store(key, cfg, res: UserFit, out_dir: Path) -> UserCircuits:
    """:func:`user_circuits` on the first ``4 user_eval_rows`` labelled rows of the user's
    store under ``out_dir``, with the transcoder ``res`` of
    :func:`jaxkit.universal_circuits.userdata.fit_user` and the settings of ``cfg``."""
    from jaxkit.crosscoder.store import SiteStore

    store = SiteStore(Path(out_dir) / "stores" / "user", batch_size=1, seed=0)
    ids = np.arange(min(store.n, 4 * cfg.user_eval_rows))
    sites = store.read(ids)[0]
    y = check_labels(cfg.activations, store.labels, store.n)[ids]
    return user_circuits(key, cfg.activations, store.models, res.spec,
                         res.aligned.params, sites, y, k=cfg.uc.k,
                         keep_frac=cfg.keep_frac, n_sizes=cfg.n_sizes, n_random=cfg.n_random,
                         tau=cfg.universal_tau, alpha=cfg.universal_alpha,
                         test_every=cfg.test_every, per_class=cfg.discovery_per_class,
                         classes=cfg.surgery_classes, ridge=cfg.ridge)
