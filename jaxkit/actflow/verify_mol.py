"""Strict drug-likeness verifier for generated molecules (the drug-like domain).

A molecule (SMILES) is valid when it passes every rule of :class:`StrictRules`, checked
in this order by :func:`check_strict` (which returns the names of the broken rules):

1. **RDKit sanitisation**: ``Chem.MolFromSmiles`` parses and sanitises it (valences,
   aromaticity, Kekulé form), and it is one connected fragment.
2. **Elements**: only the MOSES set C, N, O, S, F, Cl, Br (H implicit); heavy atoms in
   ``[min_atoms, max_atoms]``.
3. **Charge**: net formal charge 0, every formal charge in {-1, 0, +1}, and every charged
   atom bonded to an atom of opposite charge (the zwitterionic notation of nitro groups
   and N-oxides is allowed, free ions and separated zwitterions are not).
4. **No radicals**: every atom has 0 unpaired electrons (``GetNumRadicalElectrons``).
5. **Rings** (strain): ring sizes (SSSR) in ``[3, max_ring]`` (MOSES: no ring of 8 or
   more atoms); no triple bond and no cumulated double bonds (allene, ketene) inside a
   ring of fewer than 8 atoms; no endocyclic double bond in a 3-membered ring; no carbon
   with two double bonds anywhere (allenes, ketenes, heterocumulenes such as N=C=O).
6. **Catalogues**: no match in RDKit's ``FilterCatalog`` ``PAINS`` (A, B and C;
   Baell & Holloway 2010, J. Med. Chem. 53:2719) and ``BRENK`` (Brenk et al. 2008,
   ChemMedChem 3:435) catalogues, nor in the MOSES medicinal-chemistry filter table
   ``mcf.csv`` (Polykovskiy et al. 2020, Front. Pharmacol. 11:565644) when the molsets
   wheel is installed (:func:`jaxkit.actflow.moses.mcf_smarts`, matched on the molecule
   with explicit hydrogens as MOSES does; skipped otherwise, and :func:`describe` says
   so).
7. **Synthetic accessibility**: SA score (Ertl & Schuffenhauer 2009, J. Cheminform.
   1:8; RDKit's ``Contrib/SA_Score/sascorer.py``, 1 = easy .. 10 = hard) at most
   ``max_sa``.
8. **Property windows**: QED (Bickerton et al. 2012) at least ``min_qed``; molecular
   weight in ``[min_mw, max_mw]``; Crippen logP in ``[min_logp, max_logp]``.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from functools import cache

__all__ = ["StrictRules", "check_strict", "is_valid", "sa_score", "describe", "ELEMENTS"]

#: the MOSES element set (heavy atoms)
ELEMENTS = frozenset({"C", "N", "O", "S", "F", "Cl", "Br"})


@dataclass(frozen=True)
class StrictRules:
    """Windows and switches of :func:`check_strict` (inclusive bounds)."""

    min_atoms: int = 8
    max_atoms: int = 40
    max_ring: int = 7
    catalogs: tuple[str, ...] = ("PAINS", "BRENK")
    mcf: bool = True
    max_sa: float = 4.5
    min_qed: float = 0.4
    min_mw: float = 150.0
    max_mw: float = 500.0
    min_logp: float = -1.0
    max_logp: float = 5.0


@cache
def _sascorer():
    """RDKit's Contrib SA scorer module (Ertl & Schuffenhauer 2009)."""
    from rdkit.Chem import RDConfig

    path = os.path.join(RDConfig.RDContribDir, "SA_Score", "sascorer.py")
    if not os.path.exists(path):
        raise RuntimeError(f"RDKit's SA scorer is missing ({path}); reinstall rdkit")
    spec = importlib.util.spec_from_file_location("_jaxkit_sascorer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sa_score(mol) -> float:
    """Synthetic accessibility score of an RDKit molecule (1 easy .. 10 hard)."""
    return float(_sascorer().calculateScore(mol))


@cache
def _catalog(names: tuple[str, ...]):
    from rdkit.Chem.FilterCatalog import FilterCatalog, FilterCatalogParams

    params = FilterCatalogParams()
    for n in names:
        params.AddCatalog(getattr(FilterCatalogParams.FilterCatalogs, n))
    return FilterCatalog(params)


@cache
def _mcf():
    """The MOSES MCF patterns ``[(name, mol)]``, or None without the molsets wheel."""
    from rdkit import Chem

    from .moses import mcf_smarts

    table = mcf_smarts()
    if table is None:
        return None
    out = [(n, Chem.MolFromSmarts(s)) for n, s in table]
    bad = [n for n, p in out if p is None]
    if bad:
        raise ValueError(f"MOSES mcf.csv: RDKit cannot parse the SMARTS of {bad}")
    return out


def describe(rules: StrictRules = StrictRules()) -> str:
    """One line naming the rules and which catalogues are in force."""
    mcf = "MOSES MCF" if rules.mcf and _mcf() is not None else (
        "MOSES MCF skipped (molsets not installed)" if rules.mcf else "no MCF")
    return (f"strict: sanitised, one fragment, elements {'/'.join(sorted(ELEMENTS))}, "
            f"{rules.min_atoms}-{rules.max_atoms} heavy atoms, neutral, no radicals, rings "
            f"3-{rules.max_ring} without strained unsaturation, "
            f"{'+'.join(rules.catalogs)}, {mcf}, SA <= {rules.max_sa:g}, QED >= "
            f"{rules.min_qed:g}, MW {rules.min_mw:g}-{rules.max_mw:g}, logP "
            f"{rules.min_logp:g}-{rules.max_logp:g}")


def _charge_rules(mol) -> list[str]:
    out = []
    charges = [a.GetFormalCharge() for a in mol.GetAtoms()]
    if sum(charges) != 0:
        out.append(f"net formal charge {sum(charges):+d}")
    if any(abs(c) > 1 for c in charges):
        out.append("formal charge beyond +-1")
    for a in mol.GetAtoms():
        c = a.GetFormalCharge()
        if c and not any(n.GetFormalCharge() == -c for n in a.GetNeighbors()):
            out.append("separated charge (an ion or a zwitterion)")
            break
    return out


def _ring_rules(mol, max_ring: int) -> list[str]:
    from rdkit import Chem

    out = []
    info = mol.GetRingInfo()
    sizes = [len(r) for r in info.AtomRings()]
    if sizes and max(sizes) > max_ring:
        out.append(f"ring of {max(sizes)} atoms > {max_ring}")
    for ring in info.BondRings():
        n = len(ring)
        bonds = [mol.GetBondWithIdx(i) for i in ring]
        if n < 8 and any(b.GetBondType() == Chem.BondType.TRIPLE for b in bonds):
            out.append(f"triple bond in a {n}-ring")
        if n == 3 and any(b.GetBondType() == Chem.BondType.DOUBLE for b in bonds):
            out.append("double bond in a 3-ring")
    for a in mol.GetAtoms():  # a carbon with two double bonds is sp: allene, ketene
        if a.GetSymbol() == "C" and sum(b.GetBondType() == Chem.BondType.DOUBLE
                                        for b in a.GetBonds()) >= 2:
            out.append("cumulated double bonds in a small ring" if a.IsInRing()
                       else "cumulated double bonds (allene, ketene, heterocumulene)")
            break
    return out


def check_strict(smiles: str, rules: StrictRules = StrictRules()) -> list[str]:
    """The rules of :class:`StrictRules` that ``smiles`` breaks (empty: valid).

    Args:
        smiles: a SMILES string ("" counts as invalid).
        rules: the windows and switches.

    Returns:
        Short names of the broken rules, in the module's order (one catalogue hit and one
        MCF hit at most); later rules are not checked when sanitisation fails.
    """
    from rdkit import Chem
    from rdkit.Chem import QED, Crippen, Descriptors

    from .molecules import parse_checked

    mol, out = parse_checked(smiles)
    if mol is None:
        return out
    bad = sorted({a.GetSymbol() for a in mol.GetAtoms()} - ELEMENTS)
    if bad:
        out.append(f"elements {','.join(bad)}")
    n = mol.GetNumHeavyAtoms()
    if not rules.min_atoms <= n <= rules.max_atoms:
        out.append(f"{n} heavy atoms outside [{rules.min_atoms}, {rules.max_atoms}]")
    out += _charge_rules(mol)
    if any(a.GetNumRadicalElectrons() for a in mol.GetAtoms()):
        out.append("radical")
    out += _ring_rules(mol, rules.max_ring)
    if rules.catalogs:
        hit = _catalog(tuple(rules.catalogs)).GetFirstMatch(mol)
        if hit is not None:
            out.append(f"catalogue {hit.GetDescription()}")
    if rules.mcf and _mcf() is not None:
        h_mol = Chem.AddHs(mol)  # MOSES matches with explicit hydrogens (MCF4: [H]C([H]))
        out += [f"MCF {name}" for name, p in _mcf() if h_mol.HasSubstructMatch(p)][:1]
    sa = sa_score(mol)
    if sa > rules.max_sa:
        out.append(f"SA {sa:.2f} > {rules.max_sa:g}")
    qed, mw, logp = QED.qed(mol), Descriptors.MolWt(mol), Crippen.MolLogP(mol)
    if qed < rules.min_qed:
        out.append(f"QED {qed:.2f} < {rules.min_qed:g}")
    if not rules.min_mw <= mw <= rules.max_mw:
        out.append(f"MW {mw:.1f} outside [{rules.min_mw:g}, {rules.max_mw:g}]")
    if not rules.min_logp <= logp <= rules.max_logp:
        out.append(f"logP {logp:.2f} outside [{rules.min_logp:g}, {rules.max_logp:g}]")
    return out


def is_valid(smiles: str, rules: StrictRules = StrictRules()) -> bool:
    """``not check_strict(smiles, rules)``."""
    return not check_strict(smiles, rules)
