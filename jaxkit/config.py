"""Typed, validated, hashable pipeline configurations.

Each paper package defines, in its ``config.py``::

    @dataclass(frozen=True)
    class Config(PipelineConfig):
        rounds: int = 3
        lrs: tuple[float, ...] = (1e-3, 1e-2)
        method: str = "ica"
        max_d: int | None = None

        def validate(self):
            require(self.rounds >= 1, "rounds", f"must be >= 1; got {self.rounds}")

    QUICK = Config(rounds=1)
    FULL = Config()

and registers its pipeline with ``quick=QUICK, full=FULL``
(:func:`jaxkit.registry.register`). ``jaxkit run NAME --set rounds=5 --config my.toml``
resolves the configuration as: ``QUICK`` or ``FULL``, then the TOML file
(:meth:`PipelineConfig.merged`), then each ``--set`` (:meth:`PipelineConfig.override`).
Every change goes through the dataclass constructor, so :meth:`PipelineConfig.validate`
always runs. :meth:`PipelineConfig.digest` keys the stage cache on the whole
configuration and the jaxkit version.

Supported field types: ``int``, ``float``, ``bool``, ``str``, ``Path``, ``Literal[...]``,
``tuple[T, ...]`` of those (comma-separated on the command line), ``X | None``
(``none`` on the command line and in TOML), and *sections*: a field whose type is itself a
``PipelineConfig`` subclass, which groups settings that travel together (ActFlow's
``dfm`` settings of the discrete domains). A section's fields are set by a dotted path,
``--set dfm.hidden=128`` (``--set actflow.dfm.hidden=128`` with ``all``), or a TOML
sub-table (``[dfm]``, ``[actflow.dfm]``); only the fields named change, the others keep
the section's current values, and errors name the dotted path.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self, Union

__all__ = ["PipelineConfig", "require", "require_at_least", "require_positive",
           "require_distinct", "read_toml", "to_toml", "compile_cache_dir",
           "enable_compile_cache", "compile_cache_disabled", "compile_cache_in_use"]

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def require(cond: bool, field: str, msg: str) -> None:
    """Raise ``ValueError("`FIELD` MSG")`` unless ``cond``; for ``validate``."""
    if not cond:
        raise ValueError(f"`{field}` {msg}")


def require_at_least(cfg: Any, fields: Iterable[str], minimum: float = 1) -> None:
    """:func:`require` ``cfg.F >= minimum`` for each field name ``F`` of ``fields``."""
    for f in fields:
        v = getattr(cfg, f)
        require(v >= minimum, f, f"must be >= {minimum}; got {v}")


def require_positive(cfg: Any, fields: Iterable[str]) -> None:
    """:func:`require` ``cfg.F > 0`` for each field name ``F`` of ``fields``."""
    for f in fields:
        v = getattr(cfg, f)
        require(v > 0, f, f"must be > 0; got {v}")


def require_distinct(field: str, values: Sequence[Any], what: str) -> None:
    """:func:`require` that ``values`` (the tuple field ``field``) name at least one
    ``what`` and none twice."""
    require(len(values) >= 1, field, f"must name at least one {what}")
    require(len(set(values)) == len(values), field,
            f"must not repeat a {what}; got {values}")


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; a missing or malformed file is a ValueError naming it."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None


def _is_section(tp) -> bool:
    """Whether the annotation ``tp`` is a section (a ``PipelineConfig`` subclass)."""
    return isinstance(tp, type) and issubclass(tp, PipelineConfig)


def _type_name(tp, cli: bool = False) -> str:
    if _is_section(tp):
        return (f"the section {tp.__name__} (set its fields as NAME.field=value)" if cli
                else f"a table of {tp.__name__}'s fields")
    if tp is bool and cli:
        return "bool (true/false/yes/no/1/0)"
    if tp is type(None):
        return "none"
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(tp)))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a, cli) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            sep = " (comma-separated)" if cli else ""
            return f"tuple[{_type_name(args[0])}, ...]{sep}"
        return f"tuple[{', '.join(_type_name(a) for a in args)}]"
    return getattr(tp, "__name__", str(tp))


class _Bad(Exception):
    """A value that does not fit a type (internal; turned into a ValueError)."""


def _first_fit(convert: Callable[[Any, Any], Any], tp, v: Any, is_none: bool) -> Any:
    """``v`` as the union ``tp``: None where ``tp`` is optional and ``is_none``, else
    ``convert(alternative, v)`` for the first alternative it fits."""
    args = typing.get_args(tp)
    if type(None) in args and is_none:
        return None
    for a in args:
        if a is type(None):
            continue
        try:
            return convert(a, v)
        except _Bad:
            pass
    raise _Bad


def _each_item(convert: Callable[[Any, Any], Any], tp, items: Sequence[Any]) -> tuple:
    """``items`` as the tuple type ``tp`` (``tuple[T, ...]`` or fixed length), each
    through ``convert(item_type, item)``."""
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(convert(args[0], x) for x in items)
    if len(items) != len(args):
        raise _Bad
    return tuple(convert(a, x) for a, x in zip(args, items, strict=True))


def _parse(tp, s: str) -> Any:
    """Parse the command-line text ``s`` as type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _first_fit(_parse, tp, s, s.strip().lower() == "none")
    if origin is Literal:
        for choice in typing.get_args(tp):
            if str(choice) == s.strip():
                return choice
        raise _Bad
    if origin is tuple:
        return _each_item(_parse, tp, [] if not s.strip() else [p.strip() for p in s.split(",")])
    if tp is bool:
        v = s.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        raise _Bad
    if tp is int:
        try:
            return int(s.strip())
        except ValueError:
            raise _Bad from None
    if tp is float:
        try:
            return float(s.strip())
        except ValueError:
            raise _Bad from None
    if tp is str:
        return s
    if tp is Path:
        return Path(s)
    raise _Bad


def _coerce(tp, v: Any) -> Any:
    """Check the Python (or TOML) value ``v`` against ``tp``; lists become tuples, ints
    become floats for float fields, "none" becomes None for optional fields."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _first_fit(_coerce, tp, v, v is None or (isinstance(v, str)
                                                        and v.strip().lower() == "none"))
    if origin is Literal:
        for choice in typing.get_args(tp):
            if type(choice) is type(v) and choice == v:
                return v
        raise _Bad
    if origin is tuple:
        if not isinstance(v, (list, tuple)):
            raise _Bad
        return _each_item(_coerce, tp, v)
    if tp is bool:
        if isinstance(v, bool):
            return v
        raise _Bad
    if tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return int(v)
        raise _Bad
    if tp is float:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        raise _Bad
    if tp is str:
        if isinstance(v, str):
            return v
        raise _Bad
    if tp is Path and isinstance(v, str | Path):
        return Path(v)
    if _is_section(tp):
        if isinstance(v, tp):
            return v
        if isinstance(v, Mapping):
            return tp().merged(v)
        raise _Bad
    if isinstance(tp, type):
        if isinstance(v, tp):
            return v
        raise _Bad
    return v  # an annotation we cannot check (e.g. a bare TypeVar): take it as is


def _jsonable(v: Any) -> Any:
    if isinstance(v, PipelineConfig):
        return v.to_dict()
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, Path):
        return str(v)
    return v


def _toml_value(v: Any) -> str:
    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple | list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Base of every paper's ``Config``: a frozen dataclass, checked on construction.

    Subclasses add fields with defaults and override :meth:`validate`, raising
    ``ValueError`` that names the field (use :func:`require`).
    """

    def __post_init__(self):
        hints = self._hints()
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            v = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, _coerce(hints[f.name], v))
            except _Bad:
                raise ValueError(f"`{f.name}` of {type(self).__name__} must be "
                                 f"{_type_name(hints[f.name])}; got {v!r}") from None
        self.validate()

    def validate(self) -> None:
        """Check the field values; raise ``ValueError`` naming the bad field."""

    # -- field types ----------------------------------------------------------------

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.init]

    def _paths(self, prefix: str = "") -> list[str]:
        """Every settable name: the fields, and ``section.field`` inside sections."""
        out = []
        for n in self.field_names():
            v = getattr(self, n)
            out += v._paths(f"{prefix}{n}.") if isinstance(v, PipelineConfig) else [prefix + n]
        return out

    def _unknown(self, name: str, prefix: str = "") -> ValueError:
        known = self._paths(prefix)
        close = difflib.get_close_matches(prefix + name, known, n=3)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else f"; fields: {', '.join(known) or '(none)'}")
        return ValueError(f"unknown field `{prefix}{name}` for {type(self).__name__}{hint}")

    # -- changing a configuration ---------------------------------------------------

    def override(self, assignments: Sequence[str]) -> Self:
        """A copy with ``"field=value"`` assignments applied, each value parsed from
        text by the field's type (bool: true/false/1/0/yes/no; tuples comma-separated;
        ``none`` for an optional field).

        Raises:
            ValueError: naming the field for a malformed assignment, an unknown field
                (with close matches), a value of the wrong type (with the type) or a
                value ``validate`` rejects.
        """
        if isinstance(assignments, str):
            assignments = [assignments]

        def pairs():
            for a in assignments:
                name, sep, text = a.partition("=")
                name = name.strip()
                if not sep or not name:
                    raise ValueError(f"expected field=value; got {a!r}")
                yield name, text

        return self._replaced(pairs(), _parse, cli=True)

    def merged(self, mapping: Mapping[str, Any]) -> Self:
        """A copy with the values of ``mapping`` (e.g. a TOML table) applied, each
        checked against the field's type (ints are accepted for floats, lists for
        tuples, ``"none"`` for optional fields)."""
        return self._replaced(mapping.items(), _coerce, cli=False)

    def _replaced(self, pairs: Iterable[tuple[str, Any]],
                  convert: Callable[[Any, Any], Any], cli: bool, prefix: str = "") -> Self:
        """A copy with each ``(field, value)`` of ``pairs`` applied as
        ``convert(field_type, value)``; a dotted ``section.field`` name, or a mapping given
        to a section, changes those fields of the section only. An unknown field or a value
        that does not fit is a ValueError naming the field's path (``prefix`` + name) and
        the type (spelled for the command line when ``cli``)."""
        hints = self._hints()
        changes: dict[str, Any] = {}
        nested: dict[str, list[tuple[str, Any]]] = {}
        for name, v in pairs:
            head, dot, rest = name.partition(".")
            if head not in self.field_names():
                raise self._unknown(name, prefix)
            if _is_section(hints[head]) and (dot or isinstance(v, Mapping)):
                nested.setdefault(head, []).extend([(rest, v)] if dot else v.items())
                continue
            if dot:
                raise self._unknown(name, prefix)
            try:
                changes[name] = convert(hints[name], v)
            except _Bad:
                raise ValueError(f"`{prefix}{name}` expects {_type_name(hints[name], cli=cli)}; "
                                 f"got {v!r}") from None
        for head, items in nested.items():
            changes[head] = getattr(self, head)._replaced(items, convert, cli,
                                                          prefix=f"{prefix}{head}.")
        try:
            return dataclasses.replace(self, **changes)
        except ValueError as e:  # validate() names the field inside the section
            msg = str(e)
            if prefix and msg.startswith("`") and not msg.startswith(f"`{prefix}"):
                raise ValueError(f"`{prefix}{msg[1:]}") from None
            raise

    @classmethod
    def from_toml(cls, path: str | Path, base: PipelineConfig | None = None) -> Self:
        """``base`` (default: the class's defaults) merged with the top-level keys of
        the TOML file ``path``."""
        base = cls() if base is None else base
        try:
            return base.merged(read_toml(path))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    # -- reading a configuration ----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict (tuples as lists)."""
        return {n: _jsonable(getattr(self, n)) for n in self.field_names()}

    def digest(self) -> str:
        """sha256 (hex) of the canonical JSON of the class, the fields and
        ``jaxkit.__version__``: equal exactly when the results must be equal."""
        import jaxkit

        payload = {"class": f"{type(self).__module__}.{type(self).__qualname__}",
                   "fields": self.to_dict(), "jaxkit": jaxkit.__version__}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def to_toml(self, table: str = "") -> str:
        """The fields as TOML lines (``none`` as the string "none", which
        :meth:`merged` reads back as None), each section as the sub-table
        ``[table.section]`` after them (``[section]`` when ``table`` is empty)."""
        lines, subs = [], []
        for n in self.field_names():
            v = getattr(self, n)
            if isinstance(v, PipelineConfig):
                path = f"{table}.{n}" if table else n
                subs += ["", f"[{path}]", v.to_toml(path)]
            else:
                lines.append(f"{n} = {_toml_value(_jsonable(v))}")
        return "\n".join(lines + subs)


def to_toml(tables: Mapping[str, PipelineConfig]) -> str:
    """Several configurations as TOML tables named after their pipelines."""
    out = []
    for name, cfg in tables.items():
        out += [f"[{name}]", cfg.to_toml(name), ""]
    return "\n".join(out).rstrip() + "\n"


# -- JAX's persistent compilation cache (the process's run-time configuration) ----------

NO_COMPILE_CACHE_ENV = "JAXKIT_NO_COMPILE_CACHE"
COMPILE_CACHE_ENV = "JAXKIT_COMPILE_CACHE_DIR"


def compile_cache_dir() -> Path:
    """Where ``jaxkit`` keeps compiled XLA programs: ``$JAXKIT_COMPILE_CACHE_DIR``, else
    the user cache directory's ``jaxkit/xla`` (``$XDG_CACHE_HOME/jaxkit/xla``, by default
    ``~/.cache/jaxkit/xla`` on Linux; ``platformdirs`` elsewhere when installed)."""
    import os
    import sys

    if os.environ.get(COMPILE_CACHE_ENV):
        return Path(os.environ[COMPILE_CACHE_ENV]).expanduser()
    if sys.platform.startswith("linux") or not _has_platformdirs():
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "jaxkit" / "xla"
    import platformdirs

    return Path(platformdirs.user_cache_dir("jaxkit")) / "xla"


def _has_platformdirs() -> bool:
    import importlib.util

    return importlib.util.find_spec("platformdirs") is not None


def compile_cache_disabled() -> bool:
    """``JAXKIT_NO_COMPILE_CACHE`` is set to anything but ``""``, ``0``, ``false`` or
    ``no``."""
    import os

    return os.environ.get(NO_COMPILE_CACHE_ENV, "").strip().lower() not in ("", "0", "false",
                                                                           "no")


def enable_compile_cache(directory: str | Path | None = None, *,
                         max_bytes: int = 4 << 30) -> Path | None:
    """Turn on JAX's persistent compilation cache, so a second run of the same pipeline
    loads its compiled programs instead of compiling them again.

    Called by the ``jaxkit`` command line before anything compiles (``--no-compile-cache``
    or ``JAXKIT_NO_COMPILE_CACHE=1`` turn it off); a library user may call it too.
    Every program is cached whatever its compile time (the quick runs are many short
    compilations), the folder kept under ``max_bytes`` (least recently used first out)
    when the ``filelock`` package is installed (JAX's eviction needs it), unbounded
    otherwise.

    Args:
        directory: the cache folder (default :func:`compile_cache_dir`).
        max_bytes: the cache's size limit.

    Returns:
        The folder, or None when ``JAXKIT_NO_COMPILE_CACHE`` is set or the folder
        cannot be created (the run then compiles as usual).
    """
    if compile_cache_disabled():
        return None
    import jax

    path = Path(directory) if directory is not None else compile_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import importlib.util

    if importlib.util.find_spec("filelock") is not None:  # JAX's LRU eviction needs it
        jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    return path


def compile_cache_in_use() -> str | None:
    """The folder JAX's persistent compilation cache is using now, or None."""
    import jax

    return jax.config.jax_compilation_cache_dir or None
