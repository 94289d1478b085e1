"""The learner's objects as the referee sees them: proxies that forward each use to the kernel.

When a notebook is graded, its test cells run in the referee, a trusted process the learner's code
cannot reach (``autograder/engine/referee.py``). A name the test uses but does not define, such as
``attention`` or ``answer_q1``, is looked up in the learner's kernel through a :class:`Session`:

- data comes back as data (tensors, numbers, strings, tuples, ...), a private copy;
- anything else (a function, a class, a module instance, an ``nn.Parameter``) comes back as a
  :class:`RemoteObject`: calling it, reading an attribute, indexing or iterating it sends one
  request to the kernel. ``isinstance(proxy, nn.Linear)`` answers from the remote object's class
  when that class is a torch or course class; torch functions given a proxy use its values.

A test therefore reads the same whether it runs next to the learner's code (while they work, with
no session) or in the referee (at grading). Exceptions raised by the learner's code come back as
:class:`LearnerError` subclasses of the matching built-in type (``RuntimeError`` stays a
``RuntimeError``), so ``except`` clauses in tests behave the same in both places.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
from collections.abc import Callable, Iterator

import torch

from course_runtime import wire
from course_runtime.errors import ShortcutError

# Modules whose classes and functions the referee may use for names the kernel reports.
TRUSTED_MODULE_PREFIXES = ("torch", "numpy", "math", "course_runtime", "transformer_core", "collections", "builtins",
                           "functools", "itertools", "contextlib", "random", "dataclasses", "typing")


class LearnerError(Exception):
    """An exception raised by the learner's code in the kernel (its type names and message)."""

    types: tuple[str, ...] = ()


_ERROR_CLASSES: dict[tuple[str, type], type] = {}


def learner_error(types: list[str], message: str) -> LearnerError:
    """The exception to raise for an error of the learner's code: a subclass of the closest
    built-in exception type (or of ``ShortcutError``) and of :class:`LearnerError`."""
    names = [str(t) for t in types][:32]
    base: type = Exception
    if "ShortcutError" in names:
        base = ShortcutError
    else:
        for name in names:
            candidate = getattr(builtins, name, None)
            if (isinstance(candidate, type) and issubclass(candidate, Exception)
                    and candidate is not Exception):
                base = candidate
                break
    name = names[0] if names and names[0].isidentifier() else base.__name__
    if (name, base) not in _ERROR_CLASSES:
        bases = (LearnerError,) if base is Exception else (base, LearnerError)
        _ERROR_CLASSES[name, base] = type(name, bases, {"__module__": "learner"})
    error = _ERROR_CLASSES[name, base](message)
    error.types = tuple(names)
    return error


class KernelUnavailable(BaseException):
    """The kernel cannot answer (it died, timed out or sent too much); the test fails with this.

    A ``BaseException``, so that a test's broad ``except Exception`` cannot swallow it."""


class Session:
    """The connection from the referee to one learner kernel.

    Args:
        transport: sends one request (JSON text) to the kernel's agent and returns its response
            (JSON text); raises :class:`KernelUnavailable` when it cannot.
        public_definition: for a function or class the test defined, ``{"source": ..., "name": ...}``
            of its definition in the *visible* part of a test cell; raises ``ValueError`` if it is not
            there. Such definitions may be sent to the kernel (callbacks, stand-ins).

    Attributes:
        guarded: the switched-off names of every guard sent to the kernel since :meth:`begin_test`
            (the kernel's agent keeps a test's guards until the grader releases them after the test).
        refused: the switched-off names of the guard that was on when the kernel reported a
            ``ShortcutError`` since :meth:`begin_test` (the names the test switched off, never the
            kernel's text): the grader flags them for the instructor.
    """

    def __init__(self, transport: Callable[[str], str],
                 public_definition: Callable[[object], dict] | None = None) -> None:
        self.transport = transport
        self.public_definition = public_definition
        self.forbidden: list[dict] = []
        self.stand_ins: dict[str, dict] = {}
        self.requests = 0  # sent so far; what the kernel told about its objects holds until the next
        self.guarded: dict[str, None] = {}
        self.refused: dict[str, None] = {}

    def begin_test(self) -> None:
        """Start a test cell: forget the guards and refusals of the previous one."""
        self.guarded.clear()
        self.refused.clear()

    def request(self, op: wire.Op, **fields) -> object:
        """Send one request; return the decoded value or raise the learner's error."""
        self.requests += 1
        sent: list[torch.Tensor] = []
        encoded = {key: self.encode(value, sent) if key in ("target", "args", "kwargs", "key") else value
                   for key, value in fields.items()}
        text = self.transport(wire.request_text(op, **encoded))
        response = wire.parse(text)
        if type(response) is not dict or response.get("ok") not in (True, False):
            raise wire.WireError("the kernel's answer is not a response")
        if response["ok"]:
            _write_back(sent, response.get("changed", []))
            value = wire.decode(response.get("value"), resolve=self._proxy)
            target = fields.get("target")
            if type(target) is RemoteObject and "target_known" in response:
                target._learn(response["target_known"])
            return value
        error = response.get("error")
        if type(error) is not dict or type(error.get("message")) is not str or type(error.get("types")) is not list:
            raise wire.WireError("the kernel's error report is malformed")
        if "WireError" in error["types"]:
            raise AssertionError("your code returned something the grader cannot check: " + error["message"])
        if "ShortcutError" in error["types"]:
            self._note_refusal()
        raise learner_error(error["types"], error["message"])

    def _note_refusal(self) -> None:
        """Record that the kernel refused a switched-off built-in: the names of the guard that is on,
        else of every guard this test sent (a later request on a call's result runs under them too).
        With no guard sent, the learner's own code raised it: nothing is recorded."""
        names = [name for group in self.forbidden for name in group["names"]] or list(self.guarded)
        self.refused.update(dict.fromkeys(names))

    def encode(self, value: object, sent: list | None = None) -> object:
        """``value`` for a request: data as data (tensors appended to ``sent``), proxies as their
        references, the test's public functions and classes as their source."""
        if type(value) is dict and set(value) == {"$import"}:
            return value
        return wire.encode(value, reference=self._reference, sent=sent)

    def _reference(self, value: object) -> dict:
        import dataclasses
        import types

        kind = type(value)
        if kind is RemoteObject:
            return {"$ref": object.__getattribute__(value, "_ref")}
        if dataclasses.is_dataclass(value) and kind.__module__.startswith("transformer_core."):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
            return {"$build": {"callable": f"{kind.__module__}.{kind.__qualname__}",
                               "fields": self.encode(fields)}}
        if isinstance(value, (types.FunctionType, type)) and self.public_definition is not None:
            return {"$code": self.public_definition(value)}
        raise wire.WireError(f"a {kind.__module__}.{kind.__qualname__} of the test cannot be sent to the "
                             "learner's kernel; build it there (course_runtime.testing.build) instead")

    def _proxy(self, document: dict) -> object:
        if "$module" in document:
            return _trusted_module(document["$module"])
        number, kinds = document.get("$ref"), document.get("types")
        if type(number) is not int or type(kinds) is not list or not all(type(k) is str for k in kinds):
            raise wire.WireError("a malformed reference")
        proxy = RemoteObject(self, number, tuple(k[:200] for k in kinds[:64]))
        if "known" in document:
            proxy._learn(document["known"])
        return proxy

    def lookup(self, name: str) -> object:
        """The value of a global name of the learner's notebook."""
        return self.request(wire.Op.LOOKUP, name=name)

    def call(self, target: object, args: tuple, kwargs: dict) -> object:
        """Call ``target`` (a proxy, or ``{"$import": "torch.optim.SGD"}``) in the kernel, under the
        shortcut guards and stand-ins that are active in the referee."""
        for group in self.forbidden:
            self.guarded.update(dict.fromkeys(group["names"]))
        return self.request(wire.Op.CALL, target=target, args=tuple(args), kwargs=dict(kwargs),
                            grad=torch.is_grad_enabled(), forbid=list(self.forbidden),
                            stand_ins=dict(self.stand_ins))

    @contextlib.contextmanager
    def forbidding(self, names: tuple[str, ...], reason: str | None) -> Iterator[None]:
        """While the block runs, calls into the kernel run under ``forbid_shortcuts(*names)``."""
        self.forbidden.append({"names": list(names), "reason": reason})
        try:
            yield
        finally:
            self.forbidden.pop()

    @contextlib.contextmanager
    def standing_in(self, replacements: dict[str, object]) -> Iterator[None]:
        """While the block runs, calls into the kernel see these public functions or classes of the
        test in place of the notebook's names."""
        saved = dict(self.stand_ins)
        self.stand_ins.update({name: self._reference(value) for name, value in replacements.items()})
        try:
            yield
        finally:
            self.stand_ins = saved


def _write_back(sent: list[torch.Tensor], changed: object) -> None:
    """Apply to the test's tensors what the learner's code did in place to its copies of them."""
    if type(changed) is not list:
        raise wire.WireError("a malformed list of changed arguments")
    for entry in changed:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int or not 0 <= entry[0] < len(sent):
            raise wire.WireError("a malformed changed argument")
        new = wire.decode(entry[1])
        if not isinstance(new, torch.Tensor):
            raise wire.WireError("a changed argument must be a tensor")
        target = sent[entry[0]]
        with torch.no_grad():
            if new.shape == target.shape and new.dtype == target.dtype:
                target.copy_(new)
            else:
                target.data = new


_current: list[Session] = []


def current() -> Session | None:
    """The active session, or None when tests run next to the learner's code."""
    return _current[-1] if _current else None


@contextlib.contextmanager
def active(session: Session) -> Iterator[Session]:
    """Make ``session`` the one that proxies and the testing helpers use."""
    _current.append(session)
    try:
        yield session
    finally:
        _current.pop()


def _trusted_module(name: object) -> object:
    """The referee's own copy of a module the kernel named: only a trusted one it has loaded already
    (loading a module can run code, so a kernel never decides what the referee imports)."""
    if type(name) is not str or name.split(".")[0] not in TRUSTED_MODULE_PREFIXES or name not in sys.modules:
        raise wire.WireError(f"the kernel named a module the referee does not use: {str(name)[:80]!r}")
    return sys.modules[name]


def _trusted_class(qualified: str) -> type | None:
    """The referee's own class of that name, if it lives in a trusted module already loaded."""
    module_name, _, qualname = qualified.rpartition(".")
    while module_name and module_name not in sys.modules:  # nested classes: "pkg.mod.Outer.Inner"
        module_name, _, head = module_name.rpartition(".")
        qualname = f"{head}.{qualname}"
    if not module_name or module_name.split(".")[0] not in TRUSTED_MODULE_PREFIXES:
        return None
    value: object = sys.modules[module_name]
    for part in qualname.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, type) else None


# Tensor methods and properties that only read: on a remote tensor (a parameter), they run on a
# fresh copy of its values. Everything else (``grad``, ``copy_``, ``backward``) goes to the kernel.
_TENSOR_READS = frozenset({"detach", "numel", "dim", "size", "shape", "dtype", "device", "ndim", "clone",
                           "float", "double", "tolist", "item", "cpu", "T", "mT", "sum", "abs", "mean",
                           "norm", "isfinite", "all", "any", "is_floating_point", "contiguous"})


def _materialize(value: object) -> object:
    if type(value) is RemoteObject:
        return value._value()
    if type(value) in (list, tuple):
        return type(value)(_materialize(v) for v in value)
    return value


class RemoteObject:
    """An object that lives in the learner's kernel; every use is one request to it, except reads of
    what the kernel's last answer said about it (a parameter's values, a module's parts), which are
    answered here until the session sends its next request."""

    __slots__ = ("_session", "_ref", "_types", "_known", "_as_of")

    def __init__(self, session: Session, ref: int, types: tuple[str, ...]) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_types", types)
        object.__setattr__(self, "_known", None)
        object.__setattr__(self, "_as_of", -1)

    def _learn(self, known: object) -> None:
        """Keep what the kernel's current answer says about this object (see :mod:`course_runtime.agent`)."""
        if type(known) is not dict or not set(known) <= {"data", "attributes"} or (
                "attributes" in known and type(known["attributes"]) is not dict):
            raise wire.WireError("a malformed description of a kernel object")
        object.__setattr__(self, "_known", known)
        object.__setattr__(self, "_as_of", object.__getattribute__(self, "_session").requests)

    def _fresh(self, kind: str) -> object:
        """``known[kind]`` if no request was sent since the kernel said it (nothing of the learner's
        has run since), else None."""
        session, known = object.__getattribute__(self, "_session"), object.__getattribute__(self, "_known")
        if known is None or object.__getattribute__(self, "_as_of") != session.requests:
            return None
        return known.get(kind)

    def _value(self) -> object:
        """The object's data (a tensor's values, a list's items); fails for anything else."""
        data = self._fresh("data")
        if data is not None:
            return wire.decode(data)  # a new copy each time, as a request would give
        return self._session.request(wire.Op.VALUE, target=self)

    @property
    def __class__(self) -> type:  # what isinstance() sees: the closest trusted class
        for name in object.__getattribute__(self, "_types"):
            found = _trusted_class(name)
            if found is not None and found is not object:
                return found
        return RemoteObject

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in _TENSOR_READS and "torch.Tensor" in object.__getattribute__(self, "_types"):
            return getattr(self._value(), name)  # one request for a fresh copy instead of two
        attributes = self._fresh("attributes")
        if attributes is not None and type(name) is str and name in attributes:
            return wire.decode(attributes[name], resolve=object.__getattribute__(self, "_session")._proxy)
        return self._session.request(wire.Op.GETATTR, target=self, name=name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot set `{name}` on an object of the learner's kernel from a test; "
                             "call a method instead (e.g. load_state_dict or copy_ under torch.no_grad())")

    def __call__(self, *args, **kwargs) -> object:
        return self._session.call(self, args, kwargs)

    def __getitem__(self, key: object) -> object:
        return self._session.request(wire.Op.GETITEM, target=self, key=key)

    def __iter__(self) -> Iterator[object]:
        return iter(self._session.request(wire.Op.ITER, target=self))

    def __len__(self) -> int:
        if object.__getattribute__(self, "_types")[:1] == ("builtins.generator",):
            # what the kernel would answer, without asking: list(module.parameters()) asks len() first
            raise TypeError("object of type 'generator' has no len()")
        return self._session.request(wire.Op.LEN, target=self)

    def __repr__(self) -> str:
        return f"<the learner's {object.__getattribute__(self, '_types')[0]}>"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*_materialize(tuple(args)), **{k: _materialize(v) for k, v in (kwargs or {}).items()})

    def __bool__(self) -> bool:
        value = self._value()
        return bool(value)

    def __float__(self) -> float:
        return float(self._value())

    def __int__(self) -> int:
        return int(self._value())

    def __index__(self) -> int:
        return int(self._value())


def _binary(name: str):
    def method(self, other):
        return getattr(self._value(), name)(_materialize(other))

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__matmul__", "__rmatmul__", "__pow__", "__lt__", "__le__", "__gt__",
              "__ge__"):
    setattr(RemoteObject, _name, _binary(_name))
RemoteObject.__neg__ = lambda self: -self._value()
RemoteObject.__abs__ = lambda self: abs(self._value())
