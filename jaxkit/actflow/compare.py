"""One domain of the ActFlow comparison: pre-train, run every method, draw evaluations.

:func:`compare_domain` pre-trains the flow (:func:`jaxkit.actflow.loop.pretrain`), runs
the four methods of :data:`jaxkit.actflow.loop.METHODS` from it with the same keys and
budget (:func:`jaxkit.actflow.loop.run_method`), and evaluates every method's final
model on ``n_draws`` independent batches of ``n_eval`` samples drawn with the same keys
(:func:`jaxkit.actflow.loop.evaluate_draws`), the paired samples of the claim tests.
Checkpoints (pre-training chunks, rounds) live under ``checkpoint_root``, so a killed
run resumes where it stopped. The result, a :class:`~jaxkit.actflow.results.DomainRun`,
holds NumPy arrays and plain values only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import numpy as np
from jaxtyping import PRNGKeyArray

from . import discrete, domains, loop, peptides
from .config import DISCRETE, Config
from .results import DomainRun, Pretraining

__all__ = ["make_domain", "make_token_domain", "compare_domain", "compare_discrete",
           "measure_of"]


def make_token_domain(name: str, cfg: Config) -> discrete.TokenDomain:
    """The discrete task ``name`` of :data:`jaxkit.actflow.config.DISCRETE`."""
    if name == "peptides-discrete":
        return peptides.peptide_token_domain(cfg.amp_windows(),
                                             max_charge_data=cfg.peptide_max_charge,
                                             novelty_share=cfg.seq_novelty_share)
    if name == "molecules":
        from .molecules import molecule_domain

        return molecule_domain(max_mw_data=cfg.molecule_max_mw)
    if name == "druglike":
        from .druglike import druglike_domain

        dom = druglike_domain(n_data=cfg.druglike_n_data, n_ref=cfg.druglike_n_ref,
                              max_len=cfg.druglike_max_len,
                              max_logp_data=cfg.druglike_max_logp,
                              novelty=cfg.druglike_novelty)
        if dom is None:
            raise ValueError("domain 'druglike' needs the MOSES data: pip install --no-deps "
                             "molsets==0.3.1")
        return dom
    if name == "proteins":
        from .proteins import protein_domain

        return protein_domain(cfg.soluble_windows(), max_moment_data=cfg.protein_max_moment,
                              novelty_share=cfg.seq_novelty_share)
    if name == "user":
        from .user import user_domain

        return user_domain(cfg.user_data, cfg.user_verifier, column=cfg.user_column,
                           novelty=cfg.user_novelty, novelty_share=cfg.user_novelty_share)
    raise ValueError(f"`name` must be one of {DISCRETE}; got {name!r}")


def compare_discrete(cfg: Config, name: str, keys: dict[str, PRNGKeyArray], *,
                     checkpoint_root: str | Path | None = None, resume: bool = True,
                     track=None, domain: discrete.TokenDomain | None = None,
                     shared: dict | None = None) -> DomainRun:
    """:func:`compare_domain` for a discrete domain (:mod:`jaxkit.actflow.discrete`):
    pre-train the denoiser, run the four methods with the same keys, and evaluate each
    final model on ``n_draws`` draws. Returns a :class:`~jaxkit.actflow.results.DomainRun`
    like :func:`compare_domain`'s (``runs[method]`` with the final evaluation draw decoded,
    ``decoded`` strings (molecules: canonical SMILES) and ``decoded_valid``, and up to 5
    valid ``examples``, instead of token samples; ``description`` instead of ``data``).
    ``shared``: a dict kept across the seeds of one run, holding the domain and its
    compiled kernels."""
    dcfg = cfg.discrete(name)
    shared = {} if shared is None else shared
    if domain is None:
        domain = shared.get(("domain", name)) or make_token_domain(name, cfg)
    shared[("domain", name)] = dom = domain
    ck = _checkpoints(checkpoint_root, name, (dcfg.digest(), dom.description), keys, resume)
    pre = discrete.pretrain(dom, dcfg, keys["pretrain"], checkpoint_dir=ck("pretrain"),
                            resume=resume, kernels=shared.get(("kernels", name)))
    shared[("kernels", name)] = pre.kernels
    runs, draws = {}, {}
    for method in discrete.METHODS:
        run, params = discrete.run_method(pre, method, keys["rounds"], resume=resume,
                                          track=track,
                                          checkpoint_dir=ck(method.replace("+", "_")))
        draws[method] = discrete.evaluate_draws(pre.kernels, params, keys["draws"], cfg.n_draws)
        smp, val = run.samples, run.valid
        decoded = [] if smp is None else dom.decode(smp)  # final evaluation draw
        ok = [] if smp is None else [bool(v) for v in val]
        runs[method] = dataclasses.replace(
            run, samples=None, valid=None, decoded=decoded, decoded_valid=ok,
            examples=[s for s, v in zip(decoded, ok, strict=True) if v][:5])
    return DomainRun(measure="novel_circles", runs=runs, draws=draws,
                     description=dom.description,
                     pretrain=Pretraining(loss=pre.loss, seconds=pre.seconds,
                                          n_data=int(dom.data.shape[0]),
                                          resumed_from=pre.resumed_from))


def make_domain(name: str, cfg: Config) -> domains.Domain:
    """The task ``name``: a continuous domain of :data:`jaxkit.actflow.domains.CONTINUOUS`
    or the peptide domain with pre-training data of net charge <= ``peptide_max_charge``."""
    if name == "peptides":
        return peptides.peptide_domain(cfg.amp_windows(),
                                       max_charge_data=cfg.peptide_max_charge)
    return domains.CONTINUOUS[name]()


def measure_of(dom: domains.Domain) -> str:
    """The coverage measure of a domain: exact coverage where the valid set is known,
    otherwise #Circles."""
    return "coverage" if dom.reference is not None else "circles"


def _checkpoints(root: str | Path | None, name: str, settings: tuple,
                 keys: dict[str, PRNGKeyArray], resume: bool) -> Callable[[str], Path | None]:
    """``ck(stage)``: the checkpoint folder of one stage of domain ``name`` (None without
    a ``root``), ``root/actflow-NAME-STAGE-TAG`` with ``TAG`` a hash of ``settings`` and
    the pre-training and rounds keys; without ``resume`` an existing folder is deleted."""
    import jax

    tag = hashlib.sha256(repr((*settings, name,
                               [np.asarray(jax.random.key_data(keys[k])).tolist()
                                for k in ("pretrain", "rounds")])).encode()).hexdigest()[:12]

    def ck(stage: str) -> Path | None:
        if root is None:
            return None
        path = Path(root) / f"actflow-{name}-{stage}-{tag}"
        if not resume and path.exists():
            shutil.rmtree(path)
        return path

    return ck


def compare_domain(cfg: Config, name: str, keys: dict[str, PRNGKeyArray], *,
                   checkpoint_root: str | Path | None = None, resume: bool = True,
                   mesh=None, track=None, shared: dict | None = None) -> DomainRun:
    """Pre-train on domain ``name`` and run every method.

    Args:
        cfg: the pipeline configuration (``cfg.loop(name)`` gives the loop settings).
        name: the domain.
        keys: ``pretrain``, ``rounds`` (shared by every method) and ``draws`` keys.
        checkpoint_root: folder of the checkpoints (None: no checkpoints); each
            sub-folder is named after the stage and a hash of the settings and keys.
        resume: continue from the checkpoints there (otherwise they are deleted).
        mesh: a mesh with a "data" axis, or None.
        track: ``track(iterable, text)`` progress wrapper for the rounds.
        shared: a dict kept across the seeds of one run (the compiled kernels).

    Returns:
        A :class:`~jaxkit.actflow.results.DomainRun`: ``measure``, ``pretrain``,
        ``data`` (the pre-training data), ``runs[method]`` (a
        :class:`~jaxkit.actflow.results.MethodRun` with every round's samples),
        ``draws[method][metric]`` ``(n_draws,)``.
    """
    lcfg = cfg.loop(name)
    dom = make_domain(name, cfg)
    ck = _checkpoints(checkpoint_root, name, (lcfg.digest(), cfg.peptide_max_charge,
                                              repr(cfg.amp_windows())), keys, resume)
    shared = {} if shared is None else shared
    pre = loop.pretrain(dom, lcfg, keys["pretrain"], mesh=mesh,
                        checkpoint_dir=ck("pretrain"), resume=resume,
                        kernels=shared.get(("kernels", name)))
    shared[("kernels", name)] = pre.kernels
    data = np.asarray(pre.data)
    runs, draws = {}, {}
    for method in loop.METHODS:
        run, state = loop.run_method(dom, pre.model, pre.data, method, lcfg, keys["rounds"],
                                     checkpoint_dir=ck(method.replace("+", "_")),
                                     resume=resume, kernels=pre.kernels, track=track)
        if name == "peptides":  # expansion beyond the pre-training charge range
            hist = []
            for h, x, v in zip(run.history, run.samples, run.valid, strict=True):
                beyond = dom.view(x)[:, 0] > cfg.peptide_max_charge
                hist.append(dataclasses.replace(
                    h, valid_beyond_data_charge=float(np.mean(v & beyond))))
            run = dataclasses.replace(run, history=hist)
        params = eqx.filter(state.params, eqx.is_array)
        draws[method] = loop.evaluate_draws(pre.kernels, params, pre.data, keys["draws"],
                                            cfg.n_draws)
        runs[method] = run
    return DomainRun(measure=measure_of(dom), data=data, runs=runs, draws=draws,
                     pretrain=Pretraining(loss=pre.loss, seconds=pre.seconds,
                                          n_data=int(data.shape[0]),
                                          resumed_from=pre.resumed_from))
