"""CruxBench data: the JSON Lines input format for real markets and its array form.

One JSON object per line (blank lines and lines starting with ``#`` are skipped), told
apart by ``"type"``:

``{"type": "target", "id": "fed-cut-june", "prices": [[t, p], ...], "outcome": 1}``
    a target outcome and its market's price history: ``t`` any increasing numbers
    (e.g. Unix seconds or days), ``p`` in ``[0, 1]`` (last trade or mid); ``outcome``
    0, 1 or ``null`` (unresolved); optional ``"title"``.
``{"type": "market", "id": "m1", "target": "fed-cut-june", "prices": [[t, p], ...]}``
    optional further price paths of a target (e.g. a simulated market per question);
    a question names one with ``"market"``, otherwise it uses the target's own path.
``{"type": "question", "target": "fed-cut-june", "proposer": "model-a", "q": 0.4,
"p1": 0.8, "p0": 0.3, "asked_at": t, "resolved_at": t, "answer": 1}``
    a proposed subquestion: ``q = P(S)``, ``p1 = P(Y | S)``, ``p0 = P(Y | not S)`` as
    stated (projected onto the market price at ``asked_at`` before scoring; default
    ``asked_at``: the first price); ``resolved_at`` (optional) when the answer became
    public, ``answer`` 0/1/``null``; optional ``"text"``, ``"market"``.
``{"type": "quality", "proposer": "model-a", "score": 1234.5}``
    an independent quality measure of a proposer (higher is better; e.g. an arena
    rating or a benchmark score).

Errors name the file and the line (:class:`jaxkit.io.DataError`).

**CSV** (:func:`read_csv`; :func:`read_data` picks the reader by the ``.csv`` suffix): the
same records as rows of one table with a ``type`` column and the keys above as columns
(blank = null), except that a price history is given as rows ``type=price, id=<target or
market id>, t, p``, one per observation in time order; ``target`` and ``market`` rows then
carry no prices. A minimal file::

    type,id,target,proposer,t,p,outcome,q,p1,p0,resolved_at,answer,score
    target,fed,,,,,1,,,,,,
    price,fed,,,0,0.40,,,,,,,
    price,fed,,,1,0.42,,,,,,,
    price,fed,,,2,0.70,,,,,,,
    question,,fed,model-a,,,,0.5,0.7,0.2,2,1,
    quality,,,model-a,,,,,,,,,1234
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from jaxkit.io import DataError, atomic_write

__all__ = ["Dataset", "read_jsonl", "read_csv", "read_data", "parse_records", "to_records",
           "write_jsonl"]


@dataclass
class Dataset:
    """CruxBench data as arrays (``K`` markets of up to ``T`` prices, ``N`` targets,
    ``Q`` questions, ``M`` proposers). Unknown values are NaN.

    Attributes:
        target_ids: ``N`` target ids.
        proposers: ``M`` proposer names.
        outcome: ``(N,)`` 0/1/NaN.
        market_target: ``(K,)`` target index of each market.
        prices, times: ``(K, T)`` price paths, padded (``mask`` false) at the end.
        mask: ``(K, T)`` observed prices.
        question_market, question_proposer: ``(Q,)`` indices.
        q, p1, p0: ``(Q,)`` stated probabilities.
        asked_at, resolved_at: ``(Q,)`` times (NaN: the first price / unresolved).
        answer: ``(Q,)`` 0/1/NaN.
        quality: ``(M,)`` independent quality (NaN: none given).
        texts: ``Q`` question texts ("" when none).
    """

    target_ids: list[str]
    proposers: list[str]
    outcome: np.ndarray
    market_target: np.ndarray
    prices: np.ndarray
    times: np.ndarray
    mask: np.ndarray
    question_market: np.ndarray
    question_proposer: np.ndarray
    q: np.ndarray
    p1: np.ndarray
    p0: np.ndarray
    asked_at: np.ndarray
    resolved_at: np.ndarray
    answer: np.ndarray
    quality: np.ndarray
    texts: list[str] = field(default_factory=list)

    @property
    def question_target(self) -> np.ndarray:
        """``(Q,)`` target index of each question."""
        return self.market_target[self.question_market]


def _bad(where: str, msg: str) -> DataError:
    return DataError(f"{where}: {msg}")


def _prob(rec: dict, key: str, where: str, *, optional: bool = False) -> float:
    if key not in rec or rec[key] is None:
        if optional:
            return math.nan
        raise _bad(where, f"missing field {key!r}")
    v = rec[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
        raise _bad(where, f"{key!r} must be a probability in [0, 1]; got {v!r}")
    return float(v)


def _binary(rec: dict, key: str, where: str) -> float:
    v = rec.get(key)
    if v is None:
        return math.nan
    if isinstance(v, bool):
        v = int(v)
    if v not in (0, 1):
        raise _bad(where, f"{key!r} must be 0, 1 or null; got {v!r}")
    return float(v)


def _time(rec: dict, key: str, where: str) -> float:
    v = rec.get(key)
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _bad(where, f"{key!r} must be a finite number (a time); got {v!r}")
    return float(v)


def _path(rec: dict, where: str) -> tuple[list[float], list[float]]:
    pts = rec.get("prices")
    if not isinstance(pts, list) or not pts:
        raise _bad(where, "'prices' must be a non-empty list of [time, price] pairs")
    ts, ps = [], []
    for i, pt in enumerate(pts):
        if (not isinstance(pt, list | tuple) or len(pt) != 2
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in pt)):
            raise _bad(where, f"prices[{i}] must be a [time, price] pair of numbers; got {pt!r}")
        t, p = float(pt[0]), float(pt[1])
        if not math.isfinite(t):
            raise _bad(where, f"prices[{i}] has a non-finite time {pt[0]!r}")
        if not 0 <= p <= 1:
            raise _bad(where, f"prices[{i}] price must be in [0, 1]; got {pt[1]!r}")
        if ts and t <= ts[-1]:
            raise _bad(where, f"prices[{i}] time {t:g} is not after the previous ({ts[-1]:g})")
        ts.append(t)
        ps.append(p)
    return ts, ps


def _ident(rec: dict, key: str, where: str) -> str:
    v = rec.get(key)
    if not isinstance(v, str) or not v:
        raise _bad(where, f"{key!r} must be a non-empty string; got {v!r}")
    return v


def parse_records(records, source: str = "<records>") -> Dataset:
    """A :class:`Dataset` from parsed records ``[(line_number, dict), ...]`` (or plain
    dicts, numbered from 1).

    Raises:
        DataError: naming ``source`` and the line.
    """
    targets: dict[str, dict] = {}
    markets: list[tuple[str, str, list, list]] = []  # id, target, times, prices
    market_ids: dict[str, int] = {}
    questions, quality = [], {}
    items = [(i + 1, r) if not isinstance(r, tuple) else r for i, r in enumerate(records)]
    for line, rec in items:
        where = f"{source}, line {line}"
        if not isinstance(rec, dict):
            raise _bad(where, "each line must be a JSON object")
        kind = rec.get("type")
        if kind == "target":
            tid = _ident(rec, "id", where)
            if tid in targets:
                raise _bad(where, f"duplicate target id {tid!r}")
            ts, ps = _path(rec, where)
            targets[tid] = {"outcome": _binary(rec, "outcome", where), "line": line}
            market_ids[tid] = len(markets)
            markets.append((tid, tid, ts, ps))
        elif kind == "market":
            mid = _ident(rec, "id", where)
            if mid in market_ids:
                raise _bad(where, f"duplicate market id {mid!r}")
            ts, ps = _path(rec, where)
            market_ids[mid] = len(markets)
            markets.append((mid, _ident(rec, "target", where), ts, ps))
        elif kind == "question":
            questions.append((where, rec, _ident(rec, "target", where),
                              _ident(rec, "proposer", where)))
        elif kind == "quality":
            name = _ident(rec, "proposer", where)
            s = rec.get("score")
            if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
                raise _bad(where, f"'score' must be a finite number; got {s!r}")
            quality[name] = float(s)
        else:
            raise _bad(where, f"'type' must be 'target', 'market', 'question' or 'quality'; "
                              f"got {kind!r}")
    if not targets:
        raise DataError(f"{source}: no target records")
    if not questions:
        raise DataError(f"{source}: no question records")
    tids = list(targets)
    tindex = {t: i for i, t in enumerate(tids)}
    for mid, tid, _, _ in markets:
        if tid not in tindex:
            raise DataError(f"{source}: market {mid!r} names an unknown target {tid!r}")
    names = sorted({p for *_, p in questions} | set(quality))
    pindex = {p: i for i, p in enumerate(names)}
    K, T = len(markets), max(len(m[2]) for m in markets)
    prices, times = np.full((K, T), np.nan), np.full((K, T), np.nan)
    mask = np.zeros((K, T), bool)
    for k, (_, _, ts, ps) in enumerate(markets):
        prices[k, :len(ps)], times[k, :len(ts)], mask[k, :len(ts)] = ps, ts, True
    cols: dict[str, list] = {k: [] for k in ("market", "proposer", "q", "p1", "p0", "asked",
                                             "resolved", "answer", "text")}
    for where, rec, tid, prop in questions:
        if tid not in tindex:
            raise _bad(where, f"question names an unknown target {tid!r}")
        mid = rec.get("market", tid)
        if mid not in market_ids or markets[market_ids[mid]][1] != tid:
            raise _bad(where, f"question names an unknown market {mid!r} of target {tid!r}")
        cols["market"].append(market_ids[mid])
        cols["proposer"].append(pindex[prop])
        for k in ("q", "p1", "p0"):
            cols[k].append(_prob(rec, k, where))
        cols["asked"].append(_time(rec, "asked_at", where))
        cols["resolved"].append(_time(rec, "resolved_at", where))
        cols["answer"].append(_binary(rec, "answer", where))
        cols["text"].append(str(rec.get("text", "")))
    a = {k: np.asarray(v) for k, v in cols.items() if k != "text"}
    return Dataset(
        target_ids=tids, proposers=names,
        outcome=np.array([targets[t]["outcome"] for t in tids]),
        market_target=np.array([tindex[m[1]] for m in markets]), prices=prices, times=times,
        mask=mask, question_market=a["market"].astype(int),
        question_proposer=a["proposer"].astype(int), q=a["q"].astype(float),
        p1=a["p1"].astype(float), p0=a["p0"].astype(float),
        asked_at=a["asked"].astype(float), resolved_at=a["resolved"].astype(float),
        answer=a["answer"].astype(float),
        quality=np.array([quality.get(p, math.nan) for p in names]), texts=cols["text"])


def read_jsonl(path: str | Path) -> Dataset:
    """Read a CruxBench JSON Lines file (format: the module docstring).

    Raises:
        DataError: the file is missing, or a line is not valid JSON or not a valid
            record (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); JSON Lines "
                        "files must be UTF-8") from None
    for line, text in enumerate(lines, 1):
        s = text.strip()
        if not s or s.startswith("#"):
            continue
        try:
            records.append((line, json.loads(s)))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}, line {line}: invalid JSON ({e.msg} at column "
                            f"{e.colno})") from None
    return parse_records(records, str(path))


_CSV_NUMBERS = ("t", "p", "outcome", "q", "p1", "p0", "asked_at", "resolved_at", "answer",
                "score")


def read_csv(path: str | Path) -> Dataset:
    """Read a CruxBench CSV file (format: the module docstring).

    Raises:
        DataError: the file is missing or not UTF-8, it has no ``type`` column, a cell
            that must be a number is not, a price row names no target or market, or a
            record is invalid (the message names the line).
    """
    import csv

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); CSV files "
                        "must be UTF-8") from None
    rows = csv.DictReader(text.splitlines())
    if not rows.fieldnames or "type" not in [f.strip() for f in rows.fieldnames]:
        raise DataError(f"{path}: no 'type' column in the header (format: "
                        f"jaxkit.cruxbench.data)")
    records, paths, owners = [], {}, {}
    for line, raw in enumerate(rows, 2):
        rec: dict = {}
        for k, v in raw.items():
            if k is None:
                raise DataError(f"{path}, line {line}: more cells than header columns")
            k, v = k.strip(), (v or "").strip()
            if not v:
                continue
            if k in _CSV_NUMBERS:
                try:
                    v = float(v)
                except ValueError:
                    raise DataError(f"{path}, line {line}: {k!r} must be a number; got "
                                    f"{v!r}") from None
                v = int(v) if k in ("outcome", "answer") and v in (0.0, 1.0) else v
            rec[k] = v
        kind = rec.get("type")
        if kind == "price":
            pid = rec.get("id")
            if not pid or "t" not in rec or "p" not in rec:
                raise DataError(f"{path}, line {line}: a price row needs 'id', 't' and 'p'")
            paths.setdefault(pid, []).append([rec["t"], rec["p"]])
            continue
        if kind in ("target", "market"):
            owners[rec.get("id")] = rec
        records.append((line, rec))
    for pid in paths:
        if pid not in owners:
            raise DataError(f"{path}: price rows name {pid!r}, which no target or market "
                            f"row defines")
    for oid, rec in owners.items():
        rec["prices"] = paths.get(oid, [])
    return parse_records(records, str(path))


def read_data(path: str | Path) -> Dataset:
    """:func:`read_csv` for a ``.csv`` file, :func:`read_jsonl` otherwise."""
    return read_csv(path) if str(path).lower().endswith(".csv") else read_jsonl(path)


def _num(x: float):
    return None if not math.isfinite(x) else float(x)


def to_records(ds: Dataset) -> list[dict]:
    """The records of ``ds`` (the inverse of :func:`parse_records`)."""
    out = []
    own = {}
    for k, t in enumerate(ds.market_target):
        m = ds.mask[k]
        pts = [[float(a), float(b)] for a, b in zip(ds.times[k][m], ds.prices[k][m],
                                                    strict=True)]
        tid = ds.target_ids[t]
        if t not in own:
            own[t] = k
            out.append({"type": "target", "id": tid, "prices": pts,
                        "outcome": None if math.isnan(ds.outcome[t]) else int(ds.outcome[t])})
        else:
            out.append({"type": "market", "id": f"{tid}#m{k}", "target": tid, "prices": pts})
    for i in range(len(ds.q)):
        k = int(ds.question_market[i])
        t = int(ds.market_target[k])
        rec = {"type": "question", "target": ds.target_ids[t],
               "proposer": ds.proposers[ds.question_proposer[i]], "q": float(ds.q[i]),
               "p1": float(ds.p1[i]), "p0": float(ds.p0[i]),
               "asked_at": _num(ds.asked_at[i]), "resolved_at": _num(ds.resolved_at[i]),
               "answer": None if math.isnan(ds.answer[i]) else int(ds.answer[i])}
        if own[t] != k:
            rec["market"] = f"{ds.target_ids[t]}#m{k}"
        if ds.texts and ds.texts[i]:
            rec["text"] = ds.texts[i]
        out.append(rec)
    for name, s in zip(ds.proposers, ds.quality, strict=True):
        if math.isfinite(s):
            out.append({"type": "quality", "proposer": name, "score": float(s)})
    return out


def write_jsonl(path: str | Path, ds: Dataset) -> Path:
    """Write ``ds`` as CruxBench JSON Lines (atomically)."""
    return atomic_write(path, "".join(json.dumps(r) + "\n" for r in to_records(ds)))
