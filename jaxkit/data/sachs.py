"""Loader for the shipped Sachs et al. (2005) protein-signalling data (see SACHS.md)."""

from __future__ import annotations

import csv
import gzip
import io
from importlib import resources

import numpy as np

__all__ = ["load_sachs", "SACHS_CHANGE_POINTS"]

#: End rows (exclusive) of the 9 unlabeled row blocks; block-to-condition mapping unconfirmed.
SACHS_CHANGE_POINTS = (853, 1755, 2666, 3389, 4199, 4998, 5846, 6759, 7466)


def load_sachs() -> tuple[np.ndarray, list[str], np.ndarray]:
    """Return ``(x, names, truth)``.

    * ``x``: ``(7466, 11)`` float64, raw measurements, rows pooled over all conditions;
    * ``names``: the 11 column names (``praf, pmek, plcg, PIP2, PIP3, p44/42, pakts473,
      PKA, PKC, P38, pjnk``);
    * ``truth``: ``(11, 11)`` float64 0/1 consensus graph in the LiNGAM convention,
      ``truth[i, j] = 1`` iff ``names[j] -> names[i]`` (18 edges).

    Read from package data via :mod:`importlib.resources`; no network access.
    """
    pkg = resources.files("jaxkit.data")
    with (pkg / "sachs.csv.gz").open("rb") as fh, gzip.open(fh, "rt", newline="") as text:
        rows = list(csv.reader(text))
    names = [c.strip() for c in rows[0]]
    x = np.asarray(rows[1:], dtype=np.float64)
    idx = {n: i for i, n in enumerate(names)}
    truth = np.zeros((len(names), len(names)), dtype=np.float64)
    consensus = (pkg / "sachs_consensus.csv").read_text()
    reader = csv.DictReader(io.StringIO(consensus))
    for row in reader:
        cause, effect = row["Cause"].strip(), row["Effect"].strip()
        truth[idx[effect], idx[cause]] = 1.0
    return x, names, truth
