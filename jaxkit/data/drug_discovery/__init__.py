"""Drug-target interactions (Davis) and virtual-screening sets (DUD-E) shipped with jaxkit.

Small subsets, compressed, with their sources, licences and the way they were taken in
``README.md`` beside this file (``build.py`` made them). Nothing is downloaded.

* :func:`load_davis`: 4,477 binary drug-kinase interaction labels over 68 drugs and 379
  kinases (Davis et al. 2011 via MolTrans, Huang et al. 2021).
* :func:`load_dude`: one DUD-E target's actives and 10 property-matched decoys per active
  (Mysinger et al. 2012), :data:`DUDE_TARGETS`.
"""

from __future__ import annotations

import csv
import gzip
from importlib import resources

import numpy as np

__all__ = ["DUDE_TARGETS", "load_davis", "load_dude"]

DUDE_TARGETS = ("ada", "fak1", "hs90a")


def _read(name: str) -> list[dict[str, str]]:
    pkg = resources.files("jaxkit.data.drug_discovery")
    with (pkg / name).open("rb") as fh, gzip.open(fh, "rt", newline="") as text:
        return list(csv.DictReader(text))


def load_davis() -> dict:
    """The Davis interaction pairs.

    Returns:
        ``dict(smiles=[68 SMILES], sequences=[379 amino-acid strings], drug=(m,) int,
        target=(m,) int, label=(m,) float64 0/1, source=str)``: pair ``k`` is drug
        ``smiles[drug[k]]`` on kinase ``sequences[target[k]]`` with label ``label[k]``
        (1: interacts, as labelled by MolTrans).
    """
    drugs = _read("davis_drugs.csv.gz")
    targets = _read("davis_targets.csv.gz")
    pairs = _read("davis_pairs.csv.gz")
    return dict(smiles=[r["smiles"] for r in drugs],
                sequences=[r["sequence"] for r in targets],
                drug=np.array([int(r["drug"]) for r in pairs]),
                target=np.array([int(r["target"]) for r in pairs]),
                label=np.array([float(r["label"]) for r in pairs]),
                source="Davis et al. 2011 (Nat. Biotechnol. 29:1046) via MolTrans "
                       "(BSD-3-Clause) dataset/DAVIS train+val")


def load_dude(target: str) -> tuple[list[str], np.ndarray, list[str]]:
    """One DUD-E target's actives and decoys.

    Args:
        target: one of :data:`DUDE_TARGETS`.

    Returns:
        ``(smiles, active, ids)``: SMILES, ``(n,)`` float64 1 = active / 0 = decoy, and
        the ChEMBL (actives) or ZINC (decoys) identifiers.
    """
    if target not in DUDE_TARGETS:
        raise ValueError(f"`target` must be one of {', '.join(DUDE_TARGETS)}; got {target!r}")
    rows = _read(f"dude_{target}.csv.gz")
    return ([r["smiles"] for r in rows], np.array([float(r["active"]) for r in rows]),
            [r["id"] for r in rows])
