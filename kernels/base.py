"""The shape every stateful kernel of jaxkit follows (blackjax's and optax's).

An iterative algorithm is a pair of pure functions::

    state = init(...)                          # a pytree (NamedTuple) of arrays
    state, info = step(key, state, batch)      # info: a NamedTuple of diagnostics

- States and infos are pytrees of arrays, so a whole run is a ``lax.scan`` of ``step``
  and independent runs are a ``vmap`` of it (over datasets, seeds, candidates).
- The PRNG key is ``step``'s first argument and is never stored in the state: callers
  derive one key per step (``jax.random.fold_in(key, step_number)`` makes a resumed run
  replay the same keys). Deterministic steps still take the key, unused.
- Static choices (activation, sizes, solver) are arguments of the factory that builds
  ``step``; tunables that vary per call are arguments of ``step``.
- Nothing is jitted inside ``jaxkit.kernels``: the caller jits (with shardings on a
  mesh). Shapes are fixed; variable sizes are padded and masked.
- Failures inside a loop are flags in ``info`` (``converged``, ``finite``), not
  exceptions; bad inputs raise a ``ValueError`` naming the argument, also under ``jit``
  (:mod:`jaxkit.kernels.checks`).

Training is the one step of :mod:`jaxkit.kernels.train`; bandit policies
(:mod:`jaxkit.kernels.bandit`) are ``init`` / ``select`` / ``update`` triples of the same
kind.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from jaxtyping import PRNGKeyArray

__all__ = ["Algorithm", "InitFn", "StepFn"]


class InitFn(Protocol):
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class StepFn(Protocol):
    def __call__(self, key: PRNGKeyArray, state: Any, batch: Any, /) -> tuple[Any, Any]: ...


class Algorithm(NamedTuple):
    """An ``(init, step)`` pair, as returned by a kernel's top-level factory.

    Attributes:
      init: builds the initial state.
      step: ``step(key, state, batch) -> (state, info)``.
    """

    init: InitFn
    step: StepFn
