"""Oxidation-state table for charge-balanced species channels (see OXIDATION.md).

A species is an (element, oxidation state) pair; :func:`species` turns a list of element
symbols into species names (``"Si4+"``, ``"O2-"``, ``"Li+"``, ``"Fe2+"``, ``"Fe3+"``) and
their integer charges, the ``q`` of :mod:`jaxkit.kernels.charge`. The table ships with
the package (``oxidation_states.csv``); nothing is downloaded.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Sequence
from importlib import resources

import numpy as np

__all__ = ["oxidation_table", "species", "species_name", "species_allowed", "species_element",
           "element_counts"]


@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[str, tuple[int, ...]], ...]:
    text = (resources.files("jaxkit.data") / "oxidation_states.csv").read_text()
    states: dict[str, list[int]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        states.setdefault(row["element"].strip(), []).append(int(row["oxidation_state"]))
    return tuple((el, tuple(sorted(s))) for el, s in states.items())


def oxidation_table() -> dict[str, tuple[int, ...]]:
    """Element symbol -> its oxidation states in the shipped table (ascending)."""
    return dict(_table())


def species_name(element: str, charge: int) -> str:
    """``"Fe3+"``, ``"O2-"``, ``"Li+"``, ``"F-"``; ``"X0"`` for a neutral species."""
    charge = int(charge)
    if charge == 0:
        return f"{element}0"
    mag = abs(charge)
    return f"{element}{mag if mag != 1 else ''}{'+' if charge > 0 else '-'}"


def species(elements: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Species names and int64 charges for ``elements``, in the given element order and,
    within an element, by ascending charge (``["Fe"] -> (["Fe2+", "Fe3+"], [2, 3])``).

    Raises ``ValueError`` naming an unknown or duplicated element symbol (symbols are
    case-sensitive, as in the periodic table)."""
    if isinstance(elements, str):
        raise ValueError(f"`elements` must be a sequence of element symbols, not the "
                         f"string {elements!r}; wrap it in a list")
    table = oxidation_table()
    names: list[str] = []
    charges: list[int] = []
    seen: set[str] = set()
    for el in elements:
        if not isinstance(el, str) or el not in table:
            hint = ""
            if isinstance(el, str):
                close = [s for s in table if s.lower() == el.strip().lower()]
                hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown element symbol {el!r}{hint}: not in the oxidation-"
                             f"state table; known: {', '.join(sorted(table))}")
        if el in seen:
            raise ValueError(f"element {el!r} is listed twice")
        seen.add(el)
        for c in table[el]:
            names.append(species_name(el, c))
            charges.append(c)
    return names, np.asarray(charges, dtype=np.int64)


def species_allowed(atom_elements: Sequence[str], elements: Sequence[str]) -> np.ndarray:
    """``(N, K)`` bool: atom ``i`` may take species ``k`` iff species ``k`` is an oxidation
    state of ``atom_elements[i]`` (species ordered as ``species(elements)``). Pass it as
    ``allowed`` to :func:`jaxkit.kernels.charge.project_discrete` to fix each atom's
    element and let the DP choose its oxidation state (e.g. Fe2+ / Fe3+)."""
    owner = species_element(elements)
    index = {el: i for i, el in enumerate(elements)}
    out = np.zeros((len(atom_elements), owner.size), dtype=bool)
    for i, el in enumerate(atom_elements):
        if el not in index:
            raise ValueError(f"atom {i} has element {el!r}, which is not in `elements`")
        out[i] = owner == index[el]
    return out


def species_element(elements: Sequence[str]) -> np.ndarray:
    """``(K,)`` int: the index in ``elements`` of each species of ``species(elements)``
    (``["Si", "Fe", "O"] -> [0, 1, 1, 2]``), the ``element`` argument of
    :func:`jaxkit.kernels.charge.project_composition`."""
    species(elements)  # validates the symbols
    table = oxidation_table()
    return np.asarray([i for i, el in enumerate(elements) for _ in table[el]], np.int64)


def element_counts(formula: dict[str, int], elements: Sequence[str]) -> np.ndarray:
    """``(E,)`` int atoms of each of ``elements`` for a composition given as ``{symbol:
    count}`` (elements missing from ``formula`` get 0), the ``counts`` argument of
    :func:`jaxkit.kernels.charge.project_composition`. Raises ``ValueError`` for a
    symbol not in ``elements`` or a count that is not a non-negative integer."""
    species(elements)
    unknown = sorted(set(formula) - set(elements))
    if unknown:
        raise ValueError(f"`formula` has elements {unknown} that are not in `elements`")
    out = np.zeros(len(elements), np.int64)
    for i, el in enumerate(elements):
        v = formula.get(el, 0)
        if isinstance(v, bool) or int(v) != v or v < 0:
            raise ValueError(f"`formula[{el!r}]` must be a non-negative integer; got {v!r}")
        out[i] = int(v)
    return out
