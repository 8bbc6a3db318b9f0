"""The MOSES data (Polykovskiy et al. 2020, "Molecular Sets (MOSES): a benchmarking
platform for molecular generation models", Front. Pharmacol. 11:565644), read from the
installed ``molsets`` 0.3.1 wheel (MIT licence) *without importing* its ``moses`` package
(whose ``__init__`` imports torch): the files are located through the distribution's file
list (:mod:`importlib.metadata`). Provenance and checksums: ``jaxkit/data/MOSES.md``.

Install the wheel without its old dependencies: ``pip install --no-deps molsets==0.3.1``.
When it is not installed, :func:`available` is False and the readers return None.

Files used: ``moses/dataset/data/{train,test,test_scaffolds}.csv.gz`` (one ``SMILES``
column; 1,584,663 / 176,074 / 176,225 ZINC molecules; ``test_scaffolds`` holds Bemis-Murcko
scaffolds absent from ``train``) and ``moses/metrics/mcf.csv`` (22 medicinal-chemistry
filter SMARTS, columns ``names,smarts``).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

__all__ = ["available", "data_file", "read_smiles", "mcf_smarts", "sha256", "SPLITS",
           "VERSION"]

VERSION = "0.3.1"
SPLITS = ("train", "test", "test_scaffolds")
_FILES = {s: f"moses/dataset/data/{s}.csv.gz" for s in SPLITS} | {
    "mcf": "moses/metrics/mcf.csv"}


@cache
def _files() -> dict[str, Path] | None:
    import importlib.metadata as md

    try:
        dist = md.distribution("molsets")
    except md.PackageNotFoundError:
        return None
    found = {str(f): Path(f.locate()) for f in dist.files or ()}
    out = {k: found.get(rel) for k, rel in _FILES.items()}
    return out if all(p is not None and p.exists() for p in out.values()) else None


def available() -> bool:
    """Whether the molsets wheel and its data files are installed."""
    return _files() is not None


def data_file(name: str) -> Path | None:
    """The installed path of ``name`` (a split of :data:`SPLITS` or ``"mcf"``), or None
    without the wheel."""
    if name not in _FILES:
        raise ValueError(f"`name` must be one of {tuple(_FILES)}; got {name!r}")
    files = _files()
    return None if files is None else files[name]


def sha256(name: str) -> str | None:
    """SHA-256 of the installed file ``name`` (see :func:`data_file`), or None."""
    p = data_file(name)
    return None if p is None else hashlib.sha256(p.read_bytes()).hexdigest()


@lru_cache(maxsize=4)
def _all(split: str) -> tuple[str, ...]:
    p = data_file(split)
    lines = gzip.decompress(p.read_bytes()).decode().splitlines()
    if not lines or lines[0].strip() != "SMILES":
        raise ValueError(f"MOSES file {p}: expected a 'SMILES' header; got {lines[:1]!r}")
    return tuple(s.strip() for s in lines[1:] if s.strip())


def read_smiles(split: str, n: int | None = None, seed: int = 0) -> list[str] | None:
    """SMILES of a MOSES split: ``n`` rows drawn without replacement by a NumPy generator
    seeded with ``seed`` (all rows, in file order, when ``n`` is None); None without the
    wheel.

    Args:
        split: ``"train"``, ``"test"`` or ``"test_scaffolds"``.
        n: number of molecules (at most the split's size), or None.
        seed: the subsample's seed.
    """
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}; got {split!r}")
    if n is not None and n < 1:
        raise ValueError(f"`n` must be >= 1 or None; got {n}")
    if not available():
        return None
    rows = _all(split)
    if n is None:
        return list(rows)
    idx = np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)),
                                             replace=False)
    return [rows[i] for i in idx]


def mcf_smarts() -> list[tuple[str, str]] | None:
    """The MOSES MCF table as ``[(name, SMARTS)]`` (22 rows), or None without the wheel."""
    p = data_file("mcf")
    if p is None:
        return None
    rows = list(csv.reader(p.read_text().splitlines()))
    if not rows or [c.strip() for c in rows[0]] != ["names", "smarts"]:
        raise ValueError(f"MOSES file {p}: expected a 'names,smarts' header")
    out = []
    for i, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != 2:
            raise ValueError(f"MOSES file {p}, line {i}: expected 2 columns; got {len(row)}")
        out.append((row[0].strip(), row[1].strip()))
    return out
