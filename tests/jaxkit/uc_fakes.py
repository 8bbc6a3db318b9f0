"""Typed Universal Circuits results built by hand, for the report's claim tests: every
field of :mod:`jaxkit.universal_circuits.results` filled (``S`` seeds, 2 models, ``C``
classes, ``N`` latents over one depth), the arrays a test cares about passed in."""

import dataclasses

import numpy as np

from jaxkit.universal_circuits.circuits import Circuits
from jaxkit.universal_circuits.results import (
    ModelRun,
    PairAnalysis,
    SurgeryEval,
    SurgeryResult,
    Universality,
)


def fake_universality(S: int, N: int = 5, **fields) -> Universality:
    """A stacked :class:`Universality`: every latent universal, fractions 1 unless given."""
    base = dict(universal=np.ones((S, N), bool), rho=np.ones((S, 1, N)),
                threshold=np.zeros((S, 1)), fraction=np.ones(S), null_fraction=np.zeros(S),
                valid_fraction=np.ones(S), valid_universal_fraction=np.ones(S),
                decoder_fraction=np.ones(S))
    return Universality(**{**base, **fields})


def fake_pair(S: int, C: int = 10, N: int = 5, *, sizes=None, univ=None, **fields
              ) -> PairAnalysis:
    """A :class:`PairAnalysis` of ``S`` seeds: ``(S, 2, C)`` zeros, no empty
    intersection, one shared latent per class, circuits of ``sizes`` (default 5 latents),
    and ``fields`` over these."""
    mc = np.zeros((S, 2, C))
    sizes = np.full((S, 2, C), 5) if sizes is None else sizes
    circuits = Circuits(gates=np.zeros((S, 2, C, N)), sizes=sizes,
                        found=np.ones((S, 2, C), bool), full=np.ones((S, 2, C)),
                        scores=np.zeros((S, 2, C, N)), sweep=np.zeros((S, 2, C, 1)),
                        prefix_sizes=np.ones((S, 1), int))
    base = dict(shared=np.ones((S, C), int), ratio=mc, acc_intersection=mc, acc_circuit=mc,
                acc_full=mc, random_ratio=mc, top_ratio=mc, one_only=mc, xor=mc,
                universal=np.ones((S, N), bool), decoder_universal=np.ones((S, N), bool),
                empty=np.zeros((S, C), bool), precision=mc, f1=mc, xor_valid=mc,
                circuits=circuits, univ=fake_universality(S, N) if univ is None else univ,
                top_latents=np.arange(min(N, 8)), top_images=np.zeros((2, min(N, 8), 64)))
    return PairAnalysis(**{**base, **fields})


def fake_model(correct) -> ModelRun:
    """A :class:`ModelRun` with per-image test correctness ``correct``."""
    return ModelRun(leaves=None, history=[], correct=np.asarray(correct, float))


def fake_surgery(S: int, y, recall_hits, other_before, other_after, *, cls: int = 7,
                 **fields) -> SurgeryResult:
    """A :class:`SurgeryResult` of ``S`` seeds on test labels ``y`` (the class's images
    first): before / after from the per-image hits, the probe at recall 1, the class-mean
    head at 0.5, per-seed surgery a little above the pooled after, random gate 0.1 and
    another class's circuit 0.2 (each + 0.01 per seed), and ``fields`` over these."""
    seeds = np.arange(S)
    before = SurgeryEval(recall=0.0, other=float(np.mean(other_before)),
                         correct=np.r_[np.zeros(len(recall_hits)), other_before],
                         confusion=np.zeros((10, 10), int))
    after = SurgeryEval(recall=float(np.mean(recall_hits)), other=float(np.mean(other_after)),
                        correct=np.r_[recall_hits, other_after],
                        confusion=np.zeros((10, 10), int))
    base = dict(before=before, after=after,
                probe=dataclasses.replace(after, recall=1.0, other=1.0),
                class_mean=dataclasses.replace(after, recall=0.5, other=1.0),
                circuit_size=5, circuit_sizes=np.full(S, 5),
                seed_recall=np.mean(recall_hits) + 0.01 * seeds,
                seed_other=np.mean(other_after) + 0.001 * seeds,
                random_recall=0.1 + 0.01 * seeds, random_other=np.full(S, 0.9),
                wrong_recall=0.2 + 0.01 * seeds, wrong_other=np.full(S, 0.9), cls=cls,
                wrong_cls=(cls + 1) % 10, chance=0.1, y_test=np.asarray(y))
    return SurgeryResult(**{**base, **fields})
