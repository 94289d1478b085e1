"""``getattr``, ``setattr``, ``delattr`` and ``hasattr`` as a grading kernel gives them to learner code.

An attribute name computed at run time (``getattr(self, f"{name}_proj")``) is honest code the grader's
source check cannot read, so it does not judge it: in a grading kernel these four names are bound,
in the learner's namespace, to versions that refuse what graded code may never reach, whatever the
name turns out to be:

- Python's internals (dunder names other than :data:`HARMLESS_DUNDERS`, frames) and private names
  (``_x``) of anything that is not the learner's own object;
- modules other than :data:`ALLOWED_MODULES` (``getattr(torch, "sys")``);
- changing a module or a class that is not the learner's (``setattr(torch, "softmax", f)``).

Everything else behaves exactly as Python's own function. A learner cannot get Python's versions
back: the source check refuses ``del getattr`` and every route to the ``builtins`` module.

The rule constants here are shared with the source check (:mod:`autograder.engine.policy`), so both read
the same lists.
"""

from __future__ import annotations

import builtins
import types

# Modules learner code may import (and their submodules, except what the source check excludes).
ALLOWED_MODULES = frozenset({
    "__future__", "abc", "bisect", "cmath", "collections", "contextlib", "copy", "dataclasses", "decimal",
    "enum", "fractions", "functools", "heapq", "itertools", "math", "matplotlib", "numpy",
    "random", "re", "statistics", "time", "torch", "tqdm", "typing", "warnings",
    "course_runtime.data", "course_runtime.device", "course_runtime.language", "course_runtime.viz",
})
HARMLESS_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__len__", "__call__",
                              "__class__"})
# Attribute names that only ever lead below the Python level, whatever object they are read from.
INTERNAL_ATTRIBUTES = frozenset({"_C", "aten", "f_globals", "f_locals", "f_back", "f_code", "gi_frame",
                                 "cr_frame", "ag_frame", "tb_frame", "tb_next", "_getframe"})
LEARNER_MODULE = "__main__"


class RefusedAttribute(AttributeError):
    """An attribute graded code may not reach; an AttributeError, so ``getattr(x, name, default)`` and
    ``hasattr`` behave as for a missing attribute, with a message that says why."""


def module_allowed(name: str) -> bool:
    """Whether graded code may use the module called ``name`` (it or a package above it is allowed)."""
    return any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_MODULES)


def _is_learners(obj: object) -> bool:
    """Whether ``obj`` is an object or a class the learner's notebook defined."""
    kind = obj if isinstance(obj, type) else type(obj)
    return builtins.getattr(kind, "__module__", None) == LEARNER_MODULE


def _refusal(obj: object, name: object, writing: bool) -> str | None:
    """Why graded code may not read (or write) attribute ``name`` of ``obj``, or None."""
    if not isinstance(name, str):
        return None                                      # Python's own function raises its TypeError
    if name.startswith("__") and name.endswith("__") and (writing or name not in HARMLESS_DUNDERS):
        return f"`{name}` reaches Python's internals; graded code may not"
    if name in INTERNAL_ATTRIBUTES:
        return f"`.{name}` reaches below the public API; use public tensor operations"
    if isinstance(obj, types.ModuleType) and not module_allowed(obj.__name__):
        return f"the module `{obj.__name__}` is not one graded code may use"
    if isinstance(obj, types.ModuleType) and name.startswith("_"):
        return f"`{name}` is private to the module `{obj.__name__}`"
    if name.startswith("_") and not _is_learners(obj):
        return f"`{name}` is private to `{type(obj).__name__}`; use its public attributes"
    if writing and (isinstance(obj, (types.ModuleType, type)) and not _is_learners(obj)):
        return f"changing `{builtins.getattr(obj, '__name__', '?')}` would change a library everyone's code relies on"
    return None


def _checked_value(value: object, name: str) -> object:
    if isinstance(value, types.ModuleType) and not module_allowed(value.__name__):
        raise RefusedAttribute(f"`{name}` is the module `{value.__name__}`, which graded code may not use")
    return value


_MISSING = object()


def checked_getattr(obj: object, name: str, default: object = _MISSING) -> object:
    """Python's ``getattr``, refusing what graded code may not reach (see the module docstring)."""
    reason = _refusal(obj, name, writing=False)
    if reason is not None:
        raise RefusedAttribute(reason)
    try:
        value = builtins.getattr(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default
    return _checked_value(value, name)


def checked_hasattr(obj: object, name: str) -> bool:
    """Python's ``hasattr``, raising where :func:`checked_getattr` refuses."""
    try:
        checked_getattr(obj, name)
    except RefusedAttribute:
        raise
    except AttributeError:
        return False
    return True


def checked_setattr(obj: object, name: str, value: object) -> None:
    """Python's ``setattr`` on the learner's own objects and on instances; never on a library's module
    or class, nor a dunder."""
    reason = _refusal(obj, name, writing=True)
    if reason is not None:
        raise RefusedAttribute(reason)
    builtins.setattr(obj, name, value)


def checked_delattr(obj: object, name: str) -> None:
    """Python's ``delattr``, with :func:`checked_setattr`'s limits."""
    reason = _refusal(obj, name, writing=True)
    if reason is not None:
        raise RefusedAttribute(reason)
    builtins.delattr(obj, name)


def install(namespace: dict) -> None:
    """Bind the four checked functions in a learner's namespace (the grading kernel's ``__main__``)."""
    namespace.update(getattr=checked_getattr, setattr=checked_setattr, delattr=checked_delattr,
                     hasattr=checked_hasattr)
