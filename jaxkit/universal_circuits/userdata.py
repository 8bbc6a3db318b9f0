"""A universal-circuit transcoder on the user's own recorded activations.

``jaxkit run universal-circuits --set activations=DIR`` reads ``DIR``, a folder with one
subfolder per model; each subfolder holds that model's sites as activation files
(``.safetensors`` or ``.npy``, one 2-D array ``(n, d_t)`` each), read in sorted file-name
order: the first file is the input site (what the first layer reads), each next one a
layer's output. Every model's files hold the same ``n`` inputs in the same order (that
alignment is what makes a latent "universal"). An optional ``labels.npy`` (integers,
``(n,)``) in ``DIR`` adds class circuits, their intersection, calibrated universality and
surgery on the user's rows (:mod:`.usercircuits`; each model's head is the user's own
``DIR/<model>_head.safetensors`` or a read-out fitted to the labels). A folder written by
:func:`jaxkit.crosscoder.store.write_sites` (with its ``sites.json``) is read as it is.
``activation_models`` picks and orders models (default: every subfolder, sorted).
Files are never loaded whole: :class:`jaxkit.crosscoder.store.SiteStore` reads batches.

What runs: the transcoder of the pipeline (:func:`.transcoder.train_uc`, checkpointed,
resumable) over the models' sites, reconstruction only (no fidelity term: the models
themselves are not given), and the same transcoder on a control store where each model
but the first sees its rows in another (fixed random) order, so no input is shared. The
claim: joint training on aligned activations finds more universal latents (decoder-norm
share >= ``universal_tau`` in every model) than on the misaligned control, paired over
depths. Reported: per-site FVU (fraction of variance unexplained, on ``user_eval_rows``
rows) of both, and the universal-latent counts per depth.

Errors name the folder or file: a missing folder, a model with fewer than 2 site files,
a file that is not 2-D, row counts that differ between files, NaN activations, labels
that are not one integer per row (or a class with fewer than 2 rows), a head file of the
wrong shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.claims import Claim
from jaxkit.crosscoder.store import SUFFIXES, SiteStore
from jaxkit.io import DataError, atomic_write
from jaxkit.kernels import crosscoder as cc
from jaxkit.report import markdown_table
from jaxkit.stats import superiority

from .results import UserFit, UserTranscoder
from .transcoder import train_uc

__all__ = ["site_manifest", "check_user", "fit_user", "claims", "markdown"]

PAPER = "Universal circuits (your activations)"


@dataclass(frozen=True)
class _Frozen:
    """Stands in for a model in :func:`.transcoder.train_uc` when only activations are
    given (no fidelity term, so ``rest`` is never called)."""

    n_layers: int
    rest = None


def site_manifest(directory: str | Path, out: Path, models: tuple[str, ...] = ()) -> Path:
    """Write a ``sites.json`` for the user's folder (module docstring) into ``out``,
    naming the user's files by absolute path (nothing is copied). Returns ``out``.

    Raises:
        DataError: a missing folder, an unknown model, a model with fewer than 2 site
            files.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(f"{directory}: no such folder (want one subfolder of activation "
                        f"files per model)")
    if (directory / "sites.json").is_file() and not models:
        man = json.loads((directory / "sites.json").read_text())
        files = {m: [str((directory / r).resolve()) for r in rels]
                 for m, rels in man["models"].items()}
        labels = man.get("labels")
        labels = str((directory / labels).resolve()) if labels else None
    else:
        subs = sorted(p.name for p in directory.iterdir() if p.is_dir())
        names = list(models) or subs
        unknown = [m for m in names if m not in subs]
        if unknown or not names:
            raise DataError(f"{directory}: no model folder(s) {unknown or '(none)'}; it holds "
                            f"{', '.join(subs) or 'no subfolders'}")
        files = {}
        for m in names:
            fs = sorted(str(p.resolve()) for p in (directory / m).iterdir()
                        if p.suffix in SUFFIXES)
            if len(fs) < 2:
                raise DataError(f"{directory / m}: {len(fs)} activation file(s) "
                                f"({'/'.join(SUFFIXES)}); a model needs its input site and "
                                f"at least one layer's output")
            files[m] = fs
        lab = directory / "labels.npy"
        labels = str(lab.resolve()) if lab.is_file() else None
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "sites.json", json.dumps({"models": files, "labels": labels},
                                                indent=1) + "\n")
    return out


def _open(folder: Path, batch: int) -> SiteStore:
    try:
        return SiteStore(folder, batch_size=batch, seed=0)
    except ValueError as e:
        raise DataError(f"{folder}: {e}") from None


class _Misaligned:
    """A :class:`SiteStore` whose models after the first read their rows through a fixed
    permutation each: the same marginal activations, no shared inputs (the control)."""

    def __init__(self, store: SiteStore, seed: int):
        self._s = store
        rng = np.random.default_rng(seed)
        self._perm = [np.arange(store.n)] + [rng.permutation(store.n)
                                             for _ in store.models[1:]]

    def __getattr__(self, name):
        return getattr(self._s, name)

    def batch(self, position, rows=None):
        first = self._s.stores[0][0]
        pos = first.normalise(position)
        ids = first.batch_ids(pos, first.local_rows() if rows is None else rows)
        sites = tuple(tuple(st.read(p[ids]) for st in row)
                      for row, p in zip(self._s.stores, self._perm, strict=True))
        return sites, None, first.normalise((pos.epoch, pos.cursor + 1))


def _evaluate(spec, params, store, rows: int, k: int, tau: float) -> dict:
    """FVU, reconstruction and decoder-share universal latents per depth (the
    :class:`.results.UserTranscoder` fields of :func:`fit_user`)."""
    ids = np.arange(min(rows, store.n))
    sites = jax.tree.map(jnp.asarray, store.read(ids)[0])
    _, out = cc.uc_loss(params, sites, spec, k=k)
    uni = np.asarray(cc.universal_latents(params, spec, tau))
    return dict(fvu=np.asarray(out.fvu).tolist(), recon=float(out.recon),
                universal_per_depth=uni.sum(axis=1).tolist())


def check_user(directory, out: Path, *, models=(), batch: int, chunk: int = 4096) -> None:
    """Check the user's folder before any work (module docstring): its layout
    (:func:`site_manifest`), every file readable and 2-D with the same rows, at least 2
    models, at least ``batch`` rows, and every activation finite (read ``chunk`` rows at
    a time, never whole).

    Raises:
        DataError: one line naming the folder (and the file where one is at fault).
    """
    directory = Path(directory)
    folder = site_manifest(directory, out / "stores" / "user", tuple(models))
    try:
        store = SiteStore(folder, batch_size=1, seed=0)
    except ValueError as e:
        raise DataError(f"`activations` {directory}: {e}") from None
    if len(store.models) < 2:
        raise DataError(f"`activations` {directory}: {len(store.models)} model; universal "
                        f"latents need at least 2")
    if store.labels is not None:
        from .usercircuits import check_labels, load_head

        y = check_labels(directory, store.labels, store.n)
        for m, d in zip(store.models, store.d_sites, strict=True):
            f = Path(directory) / f"{m}_head.safetensors"
            if f.is_file():
                load_head(f, d[-1], int(y.max()) + 1)
    if store.n < batch:
        raise DataError(f"`activations` {directory}: {store.n} rows per file; training "
                        f"needs at least uc.batch = {batch}")
    for start in range(0, store.n, chunk):
        try:  # the store itself refuses NaN / inf rows, naming the shard
            sites = store.read(np.arange(start, min(start + chunk, store.n)))[0]
        except ValueError as e:
            raise DataError(f"`activations` {directory}: {e}") from None
        for m, row in zip(store.models, sites, strict=True):
            for j, a in enumerate(row):
                if not np.isfinite(a).all():
                    i = start + int(np.argwhere(~np.isfinite(a))[0][0])
                    raise DataError(f"`activations` {directory}, model {m!r}, site {j}: "
                                    f"NaN or inf activations (first at row {i})")


def fit_user(key, directory, out: Path, *, models=(), n_latents: int, k: int, steps: int,
             batch: int, lr: float, chunk: int, tau: float, eval_rows: int, resume: bool,
             mesh=None) -> UserFit:
    """Train the transcoder on the aligned and on the misaligned activations (module
    docstring); checkpoints under ``out/checkpoints/uc-user-*``."""
    folder = site_manifest(directory, out / "stores" / "user", tuple(models))
    store = _open(folder, batch)
    if len(store.models) < 2:
        raise DataError(f"{directory}: {len(store.models)} model; universal latents need "
                        f"at least 2")
    frozen = [_Frozen(len(d) - 1) for d in store.d_sites]
    fits = {}
    for tag, st in (("aligned", store), ("misaligned", _Misaligned(store, 1))):
        spec, params, hist = train_uc(key, st, frozen, [None] * len(frozen),
                                      n_latents=n_latents, k=k, steps=steps, lr=lr,
                                      fidelity_coef=0.0, chunk=chunk,
                                      checkpoint_dir=out / "checkpoints" / f"uc-user-{tag}",
                                      resume=resume, mesh=mesh)
        fits[tag] = UserTranscoder(**_evaluate(spec, params, st, eval_rows, k, tau),
                                   history=hist, params=jax.tree.map(np.asarray, params))
    return UserFit(models=list(store.models), d_sites=[list(d) for d in store.d_sites],
                   n=int(store.n), **fits, spec=spec,
                   layers=[f"{store.models[m]}/{j + 1}" for m, j, _ in spec.layers()])


def claims(res: UserFit, tau: float) -> list[Claim]:
    """Aligned training shares more latents than the misaligned control (jaxkit's own
    question on your data: ``kind="extension"``)."""
    a = np.asarray(res.aligned.universal_per_depth, float)
    b = np.asarray(res.misaligned.universal_per_depth, float)
    v = superiority(a - b)
    return [Claim.from_verdict(
        PAPER, "A transcoder trained jointly on your models' aligned activations has more "
        f"universal latents (decoder share >= {tau:g} in every model) than on misaligned "
        "rows.", v, note=f"Paired over the {len(a)} depth(s) of one training each; with "
        "fewer than 2 depths the t test cannot decide (not shown).", kind="extension")]


def markdown(res: UserFit, directory) -> str:
    """The report section of the user-activations run."""
    lines = [f"Your activations: `{directory}`: models {', '.join(res.models)}, "
             f"{res.n} aligned inputs; site widths {res.d_sites}.", "",
             markdown_table(["site", "FVU aligned", "FVU misaligned"],
                            [[s, a, b] for s, a, b in zip(res.layers, res.aligned.fvu,
                                                          res.misaligned.fvu,
                                                          strict=True)]), "",
             markdown_table(["depth", "universal latents (aligned)", "(misaligned)"],
                            [[d, a, b] for d, (a, b) in enumerate(zip(
                                res.aligned.universal_per_depth,
                                res.misaligned.universal_per_depth, strict=True))])]
    return "\n".join(lines)
