"""Ballad: bandit routing of a pool of LLMs in automated heuristic discovery.

``problems`` (combinatorial problems and parametric heuristics in JAX), ``reference``
(NumPy reference evaluators), ``sandbox`` (Python-source heuristics in a subprocess),
``llm`` (the proposer interface: an OpenAI-compatible client and an offline pool),
``population`` (genealogy and islands). The pipeline is ``jaxkit run ballad``.
"""
