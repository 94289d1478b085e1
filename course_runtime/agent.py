"""The grader's agent inside a learner's kernel: it calls the learner's code and returns raw results.

At grading time the tests of a notebook do not run in the learner's kernel. They run in a separate,
trusted process (the referee, see ``autograder/engine/referee.py``), which computes every expected value
and decides every verdict. Whenever a test needs the learner's code (call ``attention(q, k, v)``,
build ``SelfAttention(8, 4)``, read ``answer_q1``), the grader sends this agent one request; the
agent does exactly that and answers with the raw result, encoded by :mod:`course_runtime.wire`,
in a reply message of its own (see :func:`install`).

Nothing here decides anything: learner code runs in this process and could replace the agent. It
would gain nothing by it, because the only thing it can change is the values it sends back, and
those are checked elsewhere. Objects that cannot travel as data (modules of the learner, bound
methods, generators, ``nn.Parameter`` objects, which stay here so that in-place updates reach them)
are kept in a table and sent as references; the table is emptied after each test (``release``).

A request is JSON: ``{"op": ..., ...}`` with the ops of :class:`course_runtime.wire.Op`: ``lookup`` (a
name of the notebook), ``call``, ``getattr``, ``getitem``, ``iter``, ``len``, ``value`` (an object's data)
and ``release``.
A call may name a library callable (``{"$import": "torch.optim.SGD"}``), and its arguments may hold
the public source of a test's helper function or class (``$code``, defined here with the notebook's
globals), which is how a test hands the learner's code a callback or a stand-in.

The shortcut guard covers every request of a test, not only its calls: from the first call that carries
``forbid`` groups (the ``forbid_shortcuts`` blocks open in the referee) until ``release``, each request
and the encoding of its answer run under all of them. So a tensor subclass or a tuple subclass the
learner's function returned, whose code runs when its values are read, and a later ``getattr``, ``iter``
or ``value`` request on what the call returned, cannot reach a switched-off built-in either.

Fewer round trips: a reference to an ``nn.Parameter`` carries its values, and a reference to an
``nn.Module`` the entries of its ``_parameters``, ``_buffers`` and ``_modules`` (``"known"``, see
:func:`_known`), taken where reading them runs no code of the learner and gives exactly what
``getattr`` would; a request whose target is such an object brings a fresh copy of the target's
(``"target_known"``). The referee uses them only until it sends its next request
(:class:`course_runtime.remote.Session`), so a test reading ``layer.q_proj.weight.detach()`` costs
one request instead of three, and reads nothing the kernel would answer differently.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import types
from collections.abc import Iterator

import torch

from course_runtime import wire
from course_runtime.wire import Op

REQUEST_TYPE, REPLY_TYPE = "autograder_request", "autograder_reply"
MAX_ERROR_CHARS = 2000
# Library callables a test may ask the agent to run here (to build objects next to the learner's).
IMPORTABLE_PREFIXES = ("torch.", "course_runtime.", "transformer_core.")

_objects: dict[int, object] = {}
_counter = [0]


# What one response may carry besides the answer: values of parameters and references to the
# parts of modules, at most this many bytes of tensor data and references, this many levels deep
# (a model, its blocks, their layers).
KNOWN_BYTES = 256 * 1024
KNOWN_REFERENCES = 256
KNOWN_DEPTH = 3
_budget = {"bytes": 0, "references": 0, "depth": 0}
_TYPE_MRO = type.__dict__["__mro__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__
# Attribute lookups a class may change; a module whose class (other than nn.Module) defines one of
# them gets no "known" attributes, since getattr might not read the dictionaries.
_LOOKUP_HOOKS = ("__getattr__", "__getattribute__", "__dict__", "_parameters", "_buffers", "_modules")


def _reference(value: object) -> dict:
    if isinstance(value, types.ModuleType):
        return {"$module": value.__name__}
    _counter[0] += 1
    _objects[_counter[0]] = value
    kinds = [f"{k.__module__}.{k.__qualname__}" for k in type(value).__mro__]
    document = {"$ref": _counter[0], "types": kinds}
    known = _known(value)
    if known is not None:
        document["known"] = known
    return document


def _known(value: object) -> dict | None:
    """What the referee may read of ``value`` without asking again, or None: ``{"data": ...}``, a
    parameter's values as the ``value`` request gives them, or ``{"attributes": {name: ...}}``, the
    module attributes ``getattr`` would find in ``_parameters``, ``_buffers`` and ``_modules``
    (in that order, as ``nn.Module.__getattr__`` looks). Reading them runs no learner code."""
    if _budget["depth"] >= KNOWN_DEPTH or _budget["references"] <= 0:
        return None
    kind = type(value)
    _budget["depth"] += 1
    _budget["references"] -= 1
    try:
        if kind is torch.nn.Parameter:
            size = value.numel() * value.element_size()
            if size > _budget["bytes"] or value.device.type != "cpu":
                return None
            _budget["bytes"] -= size
            return {"data": wire.encode(value)}
        attributes = _module_attributes(value)
        if attributes is None:
            return None
        known = {}
        for name, item in attributes.items():
            if type(item) is torch.Tensor:  # a buffer travels as its values: within the budget only
                size = item.numel() * item.element_size()
                if size > _budget["bytes"] or item.device.type != "cpu":
                    continue
                _budget["bytes"] -= size
            known[name] = wire.encode(item, reference=_reference, subclasses_by_reference=True)
        return {"attributes": known}
    except (wire.WireError, RuntimeError):
        return None
    finally:
        _budget["depth"] -= 1


def _module_attributes(value: object) -> dict | None:
    """The entries of an ``nn.Module``'s ``_parameters``, ``_buffers`` and ``_modules`` that
    ``getattr(value, name)`` returns, read without running any learner code; None when its class
    changes attribute lookup."""
    mro = _TYPE_MRO(type(value))
    if torch.nn.Module not in mro:
        return None
    for klass in mro:
        if klass is not torch.nn.Module and klass is not object:
            namespace = _TYPE_DICT(klass)
            for hook in _LOOKUP_HOOKS:
                standard = hook == "__dict__" and type(namespace.get(hook)) is types.GetSetDescriptorType
                if hook in namespace and not standard:
                    return None
    instance = object.__getattribute__(value, "__dict__")
    if type(instance) is not dict:
        return None
    shadowed = set(instance)
    for klass in mro:
        shadowed.update(_TYPE_DICT(klass))
    found: dict[str, object] = {}
    for table in ("_parameters", "_buffers", "_modules"):
        entries = instance.get(table)
        if type(entries) is not dict:
            return None
        for name, item in entries.items():
            if type(name) is str and name not in shadowed and name not in found:
                found[name] = item
    return found


def _resolve(document: dict) -> object:
    if "$code" in document:
        return _define(document["$code"])
    if "$build" in document:
        spec = document["$build"]
        return _import(spec["callable"])(**wire.decode(spec["fields"], resolve=_resolve))
    number = document.get("$ref")
    if type(number) is not int or number not in _objects:
        raise LookupError(f"the grader referred to an object that no longer exists ({number!r})")
    return _objects[number]


def _import(dotted: str) -> object:
    if not dotted.startswith(IMPORTABLE_PREFIXES):
        raise ValueError(f"the agent only imports torch, course_runtime and transformer_core names, not {dotted!r}")
    module_name, _, attribute = dotted.rpartition(".")
    value = importlib.import_module(module_name)
    return getattr(value, attribute)


def _define(spec: dict) -> object:
    """A test's public function or class, defined here once per source (so a class keeps one identity)."""
    key = ("$code", spec["source"], spec["name"])
    if key not in _definitions:
        scratch: dict = {}
        exec(compile(spec["source"], f"<test code {spec['name']}>", "exec"),
             sys.modules["__main__"].__dict__, scratch)
        _definitions[key] = scratch[spec["name"]]
    return _definitions[key]


_definitions: dict[tuple, object] = {}


def _call(request: dict) -> object:
    from course_runtime.testing import standing_in

    target = request["target"]
    function = _import(target["$import"]) if "$import" in target else _resolve(target)
    received: list[torch.Tensor] = []
    args = wire.decode(request.get("args", []), resolve=_resolve, received=received)
    kwargs = wire.decode(request.get("kwargs", {"$dict": []}), resolve=_resolve, received=received)
    before = [t.detach().clone() for t in received]
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.set_grad_enabled(bool(request.get("grad", True))))
        stand_ins = {name: _resolve(document) for name, document in request.get("stand_ins", {}).items()}
        stack.enter_context(standing_in(**stand_ins))
        value = function(*args, **kwargs)
    changed = [i for i, (t, b) in enumerate(zip(received, before))
               if t.shape != b.shape or t.dtype != b.dtype or not torch.equal(t.detach(), b)]
    return _Result(value, changed, received)


# The shortcut guard of the current test: the groups of ``forbid_shortcuts`` names its calls carried,
# ``{"names": [...], "reason": ...}``, from the first call that carries one until ``release``. Every
# request runs under all of them, its answer's encoding included (see :func:`answer`).
_guard: list[dict] = []


def _remember_guard(request: dict) -> None:
    """Add the forbid groups ``request`` carries to the current test's guard."""
    for group in request.get("forbid", []):
        entry = {"names": [str(name) for name in group["names"]], "reason": group.get("reason")}
        if entry not in _guard:
            _guard.append(entry)


@contextlib.contextmanager
def _guarded() -> Iterator[None]:
    """Run a block under every group of the current test's guard."""
    from course_runtime.testing import forbid_shortcuts

    with contextlib.ExitStack() as stack:
        for group in _guard:
            stack.enter_context(forbid_shortcuts(*group["names"], reason=group["reason"]))
        yield


def _dispatch(request: dict) -> object:
    namespace = sys.modules["__main__"].__dict__
    op = request.get("op")
    if op == Op.LOOKUP:
        name = request["name"]
        if name not in namespace:
            raise NameError(f"name {name!r} is not defined in your notebook")
        return namespace[name]
    if op == Op.CALL:
        return _call(request)
    if op == Op.RELEASE:
        _objects.clear()  # under the guard still: dropping the learner's objects may run their __del__
        _definitions.clear()
        return None
    target = _resolve(request["target"])
    if op == Op.GETATTR:
        return getattr(target, request["name"])
    if op == Op.GETITEM:
        return target[wire.decode(request["key"], resolve=_resolve)]
    if op == Op.ITER:
        return list(target)
    if op == Op.LEN:
        return len(target)
    if op == Op.VALUE:
        return _Data(target)
    raise ValueError(f"unknown request {op!r}")


class _Result:
    """A call's result and the tensor arguments it changed in place (sent back so that the test's
    own tensors change too, exactly as when the test calls the function directly)."""

    def __init__(self, value: object, changed: list[int], arguments: list[torch.Tensor]) -> None:
        self.value, self.changed, self.arguments = value, changed, arguments


class _Data:
    """Marks a result to be sent as data only (a Parameter as its values, no references)."""

    def __init__(self, value: object) -> None:
        self.value = value


def _describe(error: BaseException) -> dict:
    try:
        message = str(error)
    except Exception:  # a learner's exception whose __str__ fails
        message = "(the error message could not be printed)"
    kinds = [k.__name__ for k in type(error).__mro__]
    return {"types": kinds, "message": message[:MAX_ERROR_CHARS]}


def _respond(request: dict) -> dict:
    """The response to one parsed request, its values encoded, or the error the learner's code raised."""
    try:
        value = _dispatch(request)
        response = {"ok": True}
        if isinstance(value, _Result):
            response["changed"] = [[i, wire.encode(value.arguments[i])] for i in value.changed]
            value = value.value
        if isinstance(value, _Data):
            response["value"] = wire.encode(value.value)
        else:
            response["value"] = wire.encode(value, reference=_reference, subclasses_by_reference=True)
        target = request.get("target")
        if type(target) is dict and type(target.get("$ref")) is int and target["$ref"] in _objects:
            known = _known(_objects[target["$ref"]])
            if known is not None:
                response["target_known"] = known
        return response
    except wire.WireError as error:
        return {"ok": False, "error": {"types": ["WireError"], "message": str(error)}}
    except Exception as error:  # the learner's code may raise anything; the referee decides
        return {"ok": False, "error": _describe(error)}


def answer(request_text: str) -> str:
    """The response (JSON text) to one request of the grader (see the module docstring).

    The request, the encoding of its answer and the message of an error the learner's code raised all
    run under the current test's shortcut guard (see :data:`_guard`): no code of the learner's runs
    outside it while a test is under way, whether it runs in the call itself, in a tensor subclass or
    a sequence read when the result is encoded, or in a later request on what the call returned.
    """
    _budget.update(bytes=KNOWN_BYTES, references=KNOWN_REFERENCES, depth=0)
    request = None
    try:
        request = json.loads(request_text)
        _remember_guard(request)
        with _guarded():
            response = _respond(request)
    except Exception as error:  # a malformed request, or a guard that cannot be set up (a test's typo)
        response = {"ok": False, "error": _describe(error)}
    finally:
        if type(request) is dict and request.get("op") == Op.RELEASE:
            _guard.clear()
    return json.dumps(response, allow_nan=False, separators=(",", ":"))


def install() -> None:
    """Make this agent the kernel's handler of the grader's requests.

    A request is a shell message of type :data:`REQUEST_TYPE` whose content is ``{"request": ...}``;
    the answer is a :data:`REPLY_TYPE` message ``{"status": "ok", "text": ...}`` (or
    ``{"status": "interrupted"}`` when the grader interrupted the learner's code at its time limit).
    This skips the work of executing a cell (history, input transformers, output flushing), which
    made a request cost twice as much. The grader runs this before any learner code.
    """
    from IPython import get_ipython

    from course_runtime import checked_builtins, testing

    testing._PARTIAL_LIBRARY[0] = True
    shell = get_ipython()
    checked_builtins.install(shell.user_ns)   # attribute names computed at run time are checked here
    kernel = shell.kernel

    def handle(stream, idents, message) -> None:
        try:
            content = {"status": "ok", "text": answer(str(message.get("content", {}).get("request", "")))}
        except KeyboardInterrupt:
            content = {"status": "interrupted"}
        kernel.session.send(stream, REPLY_TYPE, content, message, idents)

    kernel.shell_handlers[REQUEST_TYPE] = handle
