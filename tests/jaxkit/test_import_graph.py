"""The import graph of jaxkit (issue 70, item 5): no import cycles among jaxkit modules, no
paper package importing another paper package, kernels importing nothing of jaxkit outside
``jaxkit.kernels`` (DESIGN.md: kernels <- infrastructure <- papers <- cli).

Every module under ``jaxkit/`` and ``kernels/`` (installed as ``jaxkit.kernels``) is parsed
with :mod:`ast`; every ``import`` and ``from ... import`` counts, at module level and inside
functions (an in-function import hides a cycle, it does not remove it), with relative
imports resolved. Only the imports under ``if TYPE_CHECKING:`` are left out: they never run.
An import of ``a.b.c`` is an edge to the longest prefix that is a module of the tree;
``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The paper folders DESIGN.md lists (checked against the folders with a pipeline.py).
PAPERS = {"actflow", "amgenc", "ballad", "causal_audit", "causaltab", "compose",
          "contrastive", "cruxbench", "misaligned", "pooled_lingam", "tempbench",
          "universal_circuits"}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the tree: dotted name -> file (``kernels/`` as ``jaxkit.kernels``)."""
    out = {}
    for top, package in (("jaxkit", "jaxkit"), ("kernels", "jaxkit.kernels")):
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root / top).with_suffix("").parts)
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _known(name: str, mods) -> str | None:
    """The longest prefix of ``name`` that is a module of the tree."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in mods:
            return ".".join(parts[:n])
    return None


def import_edges(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) for every import between modules of the tree."""
    edges = set()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module
                for a in node.names:
                    full = f"{stem}.{a.name}"
                    targets.append(full if full in mods else stem)
            for t in targets:
                hit = _known(t, mods)
                if hit is not None and hit != name:
                    edges.add((name, hit))
    return edges


def strongly_connected(nodes, edges) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    succ = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return comps


def paper_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PAPERS else None


MODS = module_files()
EDGES = import_edges(MODS)


def _show(edges) -> str:
    return "\n".join(f"  {a} -> {b}" for a, b in sorted(edges))


def test_the_paper_list_is_the_folders_with_a_pipeline():
    found = {p.parent.name for p in (ROOT / "jaxkit").glob("*/pipeline.py")}
    assert found == PAPERS


def test_no_import_cycles():
    edges = EDGES
    cycles = [c for c in strongly_connected(MODS, edges) if len(c) > 1]
    inside = [{(a, b) for a, b in edges if a in c and b in c} for c in cycles]
    assert not cycles, "import cycles (edges inside each):\n" + "\n\n".join(
        _show(e) for e in inside)


def test_no_paper_imports_another():
    bad = {(a, b) for a, b in EDGES
           if paper_of(a) and paper_of(b) and paper_of(a) != paper_of(b)}
    assert not bad, "a paper package imports another paper package:\n" + _show(bad)


def test_kernels_import_nothing_of_jaxkit_outside_kernels():
    bad = {(a, b) for a, b in EDGES
           if a.startswith("jaxkit.kernels") and not b.startswith("jaxkit.kernels")}
    assert not bad, "kernels import jaxkit outside jaxkit.kernels:\n" + _show(bad)


def test_infrastructure_imports_no_paper():
    """Dependencies point one way (DESIGN.md): only the command line (``jaxkit.cli``)
    assembles the papers' sub-apps; no other infrastructure module imports a paper."""
    bad = {(a, b) for a, b in EDGES
           if paper_of(b) and not paper_of(a) and a != "jaxkit.cli"}
    assert not bad, "infrastructure imports a paper package:\n" + _show(bad)


def test_the_checker_sees_what_it_must(tmp_path):
    """The parser and the cycle search on a made-up tree: a cycle through an in-function
    relative import, a ``from package import module`` edge, a TYPE_CHECKING import left
    out, and a kernel reaching into jaxkit."""
    files = {
        "jaxkit/__init__.py": "",
        "jaxkit/a.py": "from . import b\n",
        "jaxkit/b.py": "def f():\n    from .c import g\n",
        "jaxkit/c.py": "import jaxkit.a as a\ng = 1\n",
        "jaxkit/d.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from jaxkit import a\n"),
        "kernels/__init__.py": "",
        "kernels/k.py": "from jaxkit.kernels import j\nfrom jaxkit.d import x\n",
        "kernels/j.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    mods = module_files(tmp_path)
    edges = import_edges(mods)
    assert edges == {("jaxkit.a", "jaxkit.b"), ("jaxkit.b", "jaxkit.c"),
                     ("jaxkit.c", "jaxkit.a"), ("jaxkit.kernels.k", "jaxkit.kernels.j"),
                     ("jaxkit.kernels.k", "jaxkit.d")}
    cycles = [c for c in strongly_connected(mods, edges) if len(c) > 1]
    assert cycles == [["jaxkit.a", "jaxkit.b", "jaxkit.c"]]
