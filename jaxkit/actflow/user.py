"""Your own discrete domain: your sequences and your verifier.

``jaxkit run actflow --set domains=user --set user_data=seqs.csv --set
user_verifier=mypkg.rules:is_valid`` (or :func:`user_domain` from Python) pre-trains the
discrete flow on the strings in column ``user_column`` (default ``sequence``) of a CSV
or Parquet file (other columns ignored), the records of a FASTA file (``.fasta``,
``.fa``, ``.faa``, ``.fas``) or the first field of each line of a SMILES list (``.smi``,
``.smiles``), and expands it with ActFlow, the baselines running beside it. The
alphabet is the set of characters in your file (each character is a token; a padding
token is added), the length the longest string. The verifier is a Python entry point
``module:function`` (importable from the working directory or an installed package)
called as ``function(list_of_strings) -> sequence of bools`` (one per string, True =
valid). Novel = more than ``novelty`` substitutions (Hamming on padded tokens) from
every training string; with ``novelty_share`` (``--set user_novelty_share=0.3``) the
radius is that share of the padded length instead, so that it stays reachable for short
strings and meaningful for long ones. Peptides or protein fragments (a FASTA file, say)
can use jaxkit's physicochemical verifiers:
``--set user_verifier=jaxkit.actflow.peptide_verifier:amp_like`` (antimicrobial-peptide-
like) or ``...:soluble_like`` (soluble-protein-like), with their default windows.
There is no "outside the pre-training region" for your data, so the coverage measure
is #Circles of valid novel samples.

Bad input raises :class:`jaxkit.io.DataError` naming the file and line (a missing
column, an empty cell, a string longer than ``max_len``) or a
``ValueError`` naming the entry point (not importable, not callable, a wrong answer).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from jaxkit.io import DataError, read_table

__all__ = ["load_verifier", "read_sequences", "user_domain", "FASTA_SUFFIXES",
           "SMILES_SUFFIXES"]


def load_verifier(spec: str) -> Callable[[list[str]], list[bool]]:
    """Import ``module:function``; ``ValueError`` naming ``spec`` if that fails."""
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"`user_verifier` must be 'module:function'; got {spec!r}")
    mod, fn = spec.split(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"`user_verifier` {spec!r} cannot be imported: {e}") from None
    if not callable(obj):
        raise ValueError(f"`user_verifier` {spec!r} is not callable")
    return obj


#: file suffixes read as FASTA and as SMILES lists (anything else: CSV or Parquet)
FASTA_SUFFIXES = (".fasta", ".fa", ".faa", ".fas")
SMILES_SUFFIXES = (".smi", ".smiles")


def _header(path: Path) -> list[str]:
    """The column names of a CSV or Parquet file (empty when unreadable: read_table then
    names the fault)."""
    import csv

    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
        if path.suffix.lower() in (".parquet", ".pq") or magic == b"PAR1":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        with path.open(newline="", encoding="utf-8") as fh:
            return [c.strip() for c in next(csv.reader(fh), [])]
    except Exception:  # noqa: BLE001 - read_table reports the fault with file and line
        return []


def _read_fasta(path: Path) -> tuple[list[str], list[int]]:
    """FASTA records: ``>header`` lines, then sequence lines (joined, spaces removed);
    ``DataError`` naming the file and line for a sequence before the first header, a
    record without a sequence, or a character that is not a letter, ``*`` or ``-``."""
    seqs, rows, cur, start = [], [], None, 0
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                             .splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith(">"):
            if cur is not None and not cur:
                raise DataError(f"{path}, line {start}: FASTA record without a sequence")
            if cur:
                seqs.append(cur)
                rows.append(start)
            cur, start = "", i
            continue
        if cur is None:
            raise DataError(f"{path}, line {i}: sequence before the first '>' header "
                            "(not a FASTA file?)")
        bad = sorted({c for c in line.replace(" ", "") if not (c.isalpha() or c in "*-")})
        if bad:
            raise DataError(f"{path}, line {i}: characters {''.join(bad)!r} in a FASTA "
                            "sequence")
        cur += line.replace(" ", "")
    if cur is None:
        raise DataError(f"{path}: no FASTA record (no line starts with '>')")
    if not cur:
        raise DataError(f"{path}, line {start}: FASTA record without a sequence")
    seqs.append(cur)
    rows.append(start)
    return seqs, rows


def _read_smiles(path: Path) -> tuple[list[str], list[int]]:
    """A SMILES list: the first whitespace-separated field of each line (a name may
    follow); blank lines and ``#`` comments skipped; a header line ``smiles`` /
    ``SMILES`` skipped. ``DataError`` naming the file and line for a field with
    characters outside printable ASCII."""
    seqs, rows = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                             .splitlines(), 1):
        f = line.split()
        if not f or f[0].startswith("#") or (i == 1 and f[0].lower() == "smiles"):
            continue
        if not (f[0].isascii() and f[0].isprintable()):
            raise DataError(f"{path}, line {i}: {f[0]!r} is not a SMILES string")
        seqs.append(f[0])
        rows.append(i)
    if not seqs:
        raise DataError(f"{path}: no SMILES (every line blank or a comment)")
    return seqs, rows


def read_sequences(path: str | Path, column: str = "sequence") -> tuple[list[str], list[int]]:
    """The strings of your file and their line numbers.

    FASTA (:data:`FASTA_SUFFIXES`): one string per record. SMILES list
    (:data:`SMILES_SUFFIXES`): the first field per line. CSV / Parquet: the column
    ``column``; other columns (a name, an id) are ignored.

    Raises:
        DataError: naming the file (and line) for a missing file or column, an empty
            cell, ragged rows, or a malformed FASTA / SMILES file.
    """
    path = Path(path)
    if path.is_file() and path.suffix.lower() in FASTA_SUFFIXES:
        return _read_fasta(path)
    if path.is_file() and path.suffix.lower() in SMILES_SUFFIXES:
        return _read_smiles(path)
    others = tuple(c for c in (_header(path) if path.is_file() else []) if c != column)
    t = read_table(path, labels=(column,), optional=others, min_columns=0)
    seqs = t.labels[column]
    for i, s in enumerate(seqs):
        if not s:
            raise DataError(f"{t.where(i)}, column {column!r}: empty sequence")
    return seqs, t.rows


def user_domain(path: str | Path, verifier: str | Callable, *, column: str = "sequence",
                novelty: int = 4, max_len: int | None = None,
                novelty_share: float | None = None):
    """The :class:`~jaxkit.actflow.discrete.TokenDomain` of your file and verifier; the
    novelty radius is ``novelty`` substitutions, or with ``novelty_share``
    :func:`~jaxkit.actflow.peptides.novelty_radius` of the padded length."""
    from .discrete import TokenDomain
    from .peptides import novelty_radius

    seqs, rows = read_sequences(path, column)
    alphabet = sorted({c for s in seqs for c in s})
    L = max(len(s) for s in seqs) if max_len is None else max_len
    for s, r in zip(seqs, rows, strict=True):
        if len(s) > L:
            raise DataError(f"{path}, line {r}, column {column!r}: sequence of length "
                            f"{len(s)} > max_len={L}")
    pad = len(alphabet)
    index = {c: i for i, c in enumerate(alphabet)}
    tokens = np.full((len(seqs), L), pad, np.int32)
    for i, s in enumerate(seqs):
        tokens[i, :len(s)] = [index[c] for c in s]
    if novelty_share is not None:
        novelty = novelty_radius(novelty_share, L)
    fn = load_verifier(verifier) if isinstance(verifier, str) else verifier
    name = verifier if isinstance(verifier, str) else getattr(fn, "__name__", "verifier")

    def decode(tok):
        return ["".join(alphabet[t] for t in row if t < pad) for row in np.asarray(tok)]

    def verify(tok):
        strs = decode(tok)
        try:
            out = np.asarray(fn(strs))
        except Exception as e:  # noqa: BLE001 - the user's code: report which one failed
            raise ValueError(f"`user_verifier` {name!r} raised {type(e).__name__}: {e}") \
                from e
        if out.shape != (len(strs),):
            raise ValueError(f"`user_verifier` {name!r} must return one bool per string "
                             f"({len(strs)}); got shape {out.shape}")
        return out.astype(bool)

    return TokenDomain("user", L, pad + 1, tokens, verify, decode, float(novelty),
                       description=f"{len(seqs)} sequences from {path} (column {column!r}),"
                       f" alphabet {''.join(alphabet)!r}, length <= {L}; verifier {name}; "
                       f"novel: Hamming > {novelty}")
