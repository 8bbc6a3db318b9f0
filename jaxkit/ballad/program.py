"""Program-space proposers: simulated LLMs that edit Python source of a bin-packing
priority function (evaluated in the sandbox, :mod:`jaxkit.jail.sandbox`).

A program is a sum of terms ``p = p + (coef) * (expr)`` over the slack
``s = (bins - item) / capacity``, written as plain NumPy source::

    def priority(item, bins):
        s = (bins - item) / 100.0
        p = np.zeros_like(bins, dtype=float)
        p = p + (-1.0) * (s)
        return p

:class:`SourceEditor` reads the terms of the parent program(s) it is given (with
``ast``, so any source with this shape is understood and anything else is a failed
call), maps them onto a library of term expressions (:data:`TERMS`, the six features of
:func:`jaxkit.ballad.reference.binpack_features` and four more), edits the coefficient
vector the way its :class:`~jaxkit.ballad.pools.SimulatedLLM` edits a parameter vector
(so an edit can switch a term on or off: terms with ``|coef| < prune`` are dropped,
which is a structural edit), and writes the child's source. With probability
``bug_prob`` the child has a bug an LLM could write (a wrong shape, an exception, an
endless loop), which the sandbox turns into a failed node. The child's source is what
the next calls see, so good edits seed later ones and credit through the genealogy
matters as it does for parameter vectors.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .llm import Candidate, LLMError
from .pools import SimulatedLLM

__all__ = ["TERMS", "program_source", "program_terms", "SourceEditor"]

TERMS = ("s", "s * s", "(s == 0).astype(float)", "(bins == CAP).astype(float)",
         "((s > 0) & (s <= 0.1)).astype(float)", "(item / CAP) * s",
         "np.sqrt(np.maximum(s, 0.0))", "np.exp(-10.0 * s)", "np.log1p(np.maximum(s, 0.0))",
         "(s > 0.5).astype(float)")

_BUGS = ("    return p[:1]\n", "    raise ValueError('bad edit')\n",
         "    while True:\n        pass\n")


def _expr(term: str, capacity: float) -> str:
    return term.replace("CAP", repr(float(capacity)))


def program_source(coefs: Sequence[float], capacity: float = 100.0, *,
                   prune: float = 0.0, bug: str | None = None) -> str:
    """The source of the program with coefficient ``coefs[k]`` on ``TERMS[k]`` (terms
    with ``|coef| <= prune`` left out; ``bug`` a line appended before the return)."""
    if len(coefs) != len(TERMS):
        raise ValueError(f"`coefs` must have {len(TERMS)} entries; got {len(coefs)}")
    lines = ["import numpy as np", "", "", "def priority(item, bins):",
             f"    s = (bins - item) / {float(capacity)!r}",
             "    p = np.zeros_like(bins, dtype=float)"]
    for c, t in zip(coefs, TERMS, strict=True):
        if abs(c) > prune:
            lines.append(f"    p = p + ({float(c)!r}) * ({_expr(t, capacity)})")
    body = "\n".join(lines) + "\n"
    return body + (bug or "") + "    return p\n"


def _number(node: ast.expr) -> float:
    v = ast.literal_eval(node)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("coefficient is not a number")
    return float(v)


def program_terms(source: str, capacity: float = 100.0) -> np.ndarray:
    """The coefficient vector over :data:`TERMS` of a program written by
    :func:`program_source` (or by hand in the same shape).

    Raises:
        ValueError: the source does not parse, has no ``priority`` function, or has a
            term outside the library.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"source does not parse: {e}") from None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == "priority"), None)
    if fn is None:
        raise ValueError("source defines no function `priority`")
    last = fn.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
            and last.value.id == "p"):
        raise ValueError("`priority` does not end with `return p` (not a sum of terms)")
    known = {ast.dump(ast.parse(_expr(t, capacity), mode="eval").body): k
             for k, t in enumerate(TERMS)}
    coefs = np.zeros(len(TERMS))
    for st in fn.body:
        v = st.value if isinstance(st, ast.Assign) else None
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)
                and isinstance(v.left, ast.Name) and v.left.id == "p"):
            continue
        term = v.right
        if not (isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult)):
            raise ValueError(f"term is not `coef * expr`: {ast.unparse(term)}")
        k = known.get(ast.dump(term.right))
        if k is None:
            raise ValueError(f"term outside the library: {ast.unparse(term.right)}")
        coefs[k] += _number(term.left)
    return coefs


@dataclass(frozen=True)
class SourceEditor:
    """A proposer that edits program source (see the module docstring).

    Attributes:
        model: the edit behaviour (step, tail, insight, bias, failures, drift, price).
        capacity: bin capacity written into the programs.
        prune: terms whose coefficient ends below this size are dropped.
        bug_prob: probability that the child carries a bug.
    """

    model: SimulatedLLM
    capacity: float = 100.0
    prune: float = 0.05
    bug_prob: float = 0.0

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def cost(self) -> float:
        return self.model.cost

    def propose(self, parents: Sequence[Candidate], context: Mapping[str, Any]
                ) -> tuple[list[Candidate], float]:
        """Edit the parents' programs; ``context`` as for :meth:`SimulatedLLM.propose`
        (the examples may be (source, score) pairs: they are read as programs)."""
        rng: np.random.Generator = context["rng"]
        try:
            as_theta = [Candidate(theta=program_terms(p.source or "", self.capacity),
                                  note=p.note) for p in parents]
            examples = [(program_terms(src, self.capacity), sc)
                        for src, sc in context.get("source_examples", ())]
        except ValueError as e:
            raise LLMError(self.name, "offline", f"cannot read the parent program: {e}",
                           cost=self.cost) from None
        ctx = dict(context, examples=examples)
        (child,), cost = self.model.propose(as_theta, ctx)
        bug = _BUGS[rng.integers(len(_BUGS))] if rng.random() < self.bug_prob else None
        src = program_source(child.theta, self.capacity, prune=self.prune, bug=bug)
        return [Candidate(source=src, note=self.name)], cost
