"""Ballad: bandit routing of a pool of LLMs in automated heuristic discovery.

``problems`` (combinatorial problems and parametric heuristics in JAX), ``reference``
(NumPy reference evaluators), ``sandbox`` (Python-source heuristics in a subprocess),
``llm`` (the proposer interface: an OpenAI-compatible client and an offline pool),
``population`` (genealogy and islands), ``search`` (the routed discovery loop),
``compare`` (the routing comparison of one problem), ``config`` (its settings), ``report``
(tables, figure, claims). The pipeline is ``jaxkit run ballad`` (``pipeline``).
"""
