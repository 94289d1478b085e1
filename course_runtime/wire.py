"""The narrow channel between a learner's kernel and the grader: JSON text, validated, no pickle.

When a notebook is graded, the learner's code runs in a sandboxed kernel and the tests run in a
separate, trusted process (the referee, :mod:`autograder.engine.referee`). Everything that crosses between
them is a JSON document built by :func:`encode` and read back by :func:`decode`. Only plain data
travels:

- ``None``, ``bool``, ``int``, ``float`` (NaN and infinities included), ``complex`` and ``str``;
- ``list``, ``tuple`` and ``dict`` of those (nested at most :data:`MAX_DEPTH` deep);
- ``torch.Size``, ``torch.dtype`` and ``torch.device``;
- tensors, as their dtype, shape and raw bytes (base64), always rebuilt as plain CPU tensors;
- references to objects that stay on the side that owns them (``{"$ref": n, "types": [...]}``), from
  the kernel with what may be read of them without asking again (``"known"``: a parameter's values,
  a module's parameters, buffers and submodules; see :mod:`course_runtime.agent`);
- from the referee only: the public source of a test's own function or class (``$code``) and a
  course-library dataclass to rebuild from its fields (``$build``).

:func:`decode` checks every field (known tags only, dtypes from a fixed list, byte counts that match
the shape, nesting depth, sizes), so a hostile kernel can send wrong answers but nothing else.

Example:
    >>> text = dumps({"q": torch.ones(2, 3)})
    >>> loads(text)["q"].shape
    torch.Size([2, 3])
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from enum import Enum

import torch

MAX_DEPTH = 24
# The largest document either side accepts, in characters (tensors travel as base64).
MAX_CHARS = 16 * 1024 * 1024
MAX_DIMS = 16
MAX_INT = 2 ** 63
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)}
_TAGS = ("$tensor", "$tuple", "$dict", "$size", "$dtype", "$device", "$float", "$complex", "$ref",
         "$module", "$code", "$build")


class Op(str, Enum):
    """The operation of a request to the grading agent in the kernel (:mod:`course_runtime.agent`):
    ``{"op": ..., ...}``, sent by the referee's proxies (:mod:`course_runtime.remote`) and, for
    ``release`` after each test, by the grader."""

    LOOKUP = "lookup"      # a global name of the notebook
    CALL = "call"          # call a target with arguments, under the test's guards and stand-ins
    GETATTR = "getattr"
    GETITEM = "getitem"
    ITER = "iter"
    LEN = "len"
    VALUE = "value"        # an object's data, no references
    RELEASE = "release"    # the end of a test: drop its objects and guards


def request_text(op: Op, **fields: object) -> str:
    """The JSON text of one request to the agent (``fields`` already encoded)."""
    return json.dumps({"op": op.value, **fields}, allow_nan=False, separators=(",", ":"))


#: What the grader sends the agent after every test cell.
RELEASE_REQUEST = request_text(Op.RELEASE)


class WireError(ValueError):
    """A document that does not follow the format (too deep, too large, a bad tensor, ...)."""


def encode(value: object, *, reference: Callable[[object], dict] | None = None,
           subclasses_by_reference: bool = False, sent: list | None = None, depth: int = 0) -> object:
    """``value`` as a JSON-ready structure.

    Args:
        value: what to send.
        reference: called with any object that cannot travel as data; returns its
            ``{"$ref": ...}`` (or another tagged entry). Without it, such objects raise
            :class:`WireError`.
        subclasses_by_reference: send tensor subclasses (``nn.Parameter``) through ``reference``, so
            they stay where they live and in-place updates reach them; otherwise as their values.
        sent: if given, every tensor sent as values is appended to it, in document order.
        depth: the current nesting depth (internal).

    Raises:
        WireError: for objects that cannot be encoded, or nesting deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"a value nested more than {MAX_DEPTH} levels deep cannot be sent")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        if abs(value) >= MAX_INT:
            return {"$float": repr(float(value))}
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is complex:
        return {"$complex": [repr(value.real), repr(value.imag)]}
    if kind is torch.Size:
        return {"$size": [int(d) for d in value]}
    if kind is torch.dtype:
        return {"$dtype": str(value).removeprefix("torch.")}
    if kind is torch.device:
        return {"$device": str(value)}
    # type(), not isinstance(): a proxy may claim another __class__.
    if kind is torch.Tensor or (issubclass(kind, torch.Tensor) and not (reference and subclasses_by_reference)):
        if sent is not None:
            sent.append(value)
        return _encode_tensor(value)
    inner = dict(reference=reference, subclasses_by_reference=subclasses_by_reference, sent=sent,
                 depth=depth + 1)
    if kind is list or issubclass(kind, tuple):  # named tuples travel as plain tuples
        items = [encode(v, **inner) for v in value]
        return items if kind is list else {"$tuple": items}
    if issubclass(kind, dict):  # an OrderedDict (a state_dict) travels as a plain dict
        return {"$dict": [[encode(k, **inner), encode(v, **inner)] for k, v in dict.items(value)]}
    if reference is not None:
        return reference(value)
    raise WireError(f"a {kind.__module__}.{kind.__qualname__} cannot be sent")


def _encode_tensor(tensor: torch.Tensor) -> dict:
    plain = tensor.detach().to("cpu").contiguous()
    if str(plain.dtype).removeprefix("torch.") not in DTYPES:
        raise WireError(f"tensors of dtype {plain.dtype} cannot be sent")
    data = plain.reshape(-1).view(torch.uint8).numpy().tobytes() if plain.numel() else b""
    return {"$tensor": {"dtype": str(plain.dtype).removeprefix("torch."), "shape": list(plain.shape),
                        "requires_grad": bool(tensor.requires_grad),
                        "data": base64.b64encode(data).decode("ascii")}}


def decode(document: object, *, resolve: Callable[[dict], object] | None = None,
           received: list | None = None, depth: int = 0) -> object:
    """Rebuild a value from :func:`encode`'s structure, checking every field.

    Args:
        document: the parsed JSON.
        resolve: turns a ``{"$ref": ...}`` into an object; without it, references are refused.
        received: if given, every tensor rebuilt from values is appended to it, in document order
            (the order in which :func:`encode` lists them in ``sent``).
        depth: the current nesting depth (internal).

    Raises:
        WireError: saying what is wrong.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"the value is nested more than {MAX_DEPTH} levels deep")
    kind = type(document)
    if document is None or kind in (bool, str, float):
        return document
    if kind is int:
        if abs(document) >= MAX_INT:
            raise WireError("an integer is too large")
        return document
    inner = dict(resolve=resolve, received=received, depth=depth + 1)
    if kind is list:
        return [decode(v, **inner) for v in document]
    if kind is not dict or len(document) != 1 + ("types" in document) + ("known" in document and "$ref" in document):
        raise WireError(f"unexpected {kind.__name__} in the document")
    tag = next((t for t in _TAGS if t in document), None)
    if tag is None:
        raise WireError(f"unknown entry {sorted(document)[:3]}")
    body = document[tag]
    if tag == "$tensor":
        tensor = _decode_tensor(body)
        if received is not None:
            received.append(tensor)
        return tensor
    if tag == "$tuple":
        _expect(body, list, tag)
        return tuple(decode(v, **inner) for v in body)
    if tag == "$dict":
        _expect(body, list, tag)
        result = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise WireError("a $dict entry must be a [key, value] pair")
            key = decode(pair[0], **inner)
            if type(key) not in (str, int, bool, float, tuple, type(None)):
                raise WireError("a dict key must be a string, a number or a tuple")
            result[key] = decode(pair[1], **inner)
        return result
    if tag == "$size":
        return torch.Size(_dims(body))
    if tag == "$dtype":
        if body not in DTYPES:
            raise WireError(f"unknown dtype {str(body)[:40]!r}")
        return DTYPES[body]
    if tag == "$device":
        _expect(body, str, tag)
        try:
            return torch.device(body[:40])
        except RuntimeError as error:
            raise WireError(f"bad device {body[:40]!r}") from error
    if tag == "$float":
        return _float(body)
    if tag == "$complex":
        _expect(body, list, tag)
        if len(body) != 2:
            raise WireError("a $complex must have two parts")
        return complex(_float(body[0]), _float(body[1]))
    if resolve is None:
        raise WireError(f"{tag} entries are not accepted here")
    return resolve(document)


def _expect(body: object, kind: type, tag: str) -> None:
    if type(body) is not kind:
        raise WireError(f"{tag} must hold a {kind.__name__}")


def _float(text: object) -> float:
    if type(text) is not str or len(text) > 40:
        raise WireError("a $float must be a short string")
    try:
        return float(text)
    except ValueError as error:
        raise WireError(f"bad number {text!r}") from error


def _dims(shape: object) -> list[int]:
    if type(shape) is not list or len(shape) > MAX_DIMS or not all(
            type(d) is int and 0 <= d < MAX_INT for d in shape):
        raise WireError(f"a shape must be a list of at most {MAX_DIMS} non-negative integers")
    return shape


def _decode_tensor(body: object) -> torch.Tensor:
    if type(body) is not dict or set(body) != {"dtype", "shape", "requires_grad", "data"}:
        raise WireError("a $tensor needs exactly dtype, shape, requires_grad and data")
    dtype = DTYPES.get(body["dtype"]) if type(body["dtype"]) is str else None
    if dtype is None:
        raise WireError(f"unknown tensor dtype {str(body['dtype'])[:40]!r}")
    shape = _dims(body["shape"])
    if type(body["data"]) is not str or type(body["requires_grad"]) is not bool:
        raise WireError("a $tensor's data must be base64 text and requires_grad a bool")
    try:
        raw = base64.b64decode(body["data"], validate=True)
    except (binascii.Error, ValueError) as error:
        raise WireError("a $tensor's data is not valid base64") from error
    count = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if count * itemsize != len(raw):
        raise WireError(f"a tensor of shape {tuple(shape)} and dtype {body['dtype']} needs "
                        f"{count * itemsize} bytes, got {len(raw)}")
    if count == 0:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        tensor = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)
    if body["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
        tensor.requires_grad_(True)
    return tensor


def dumps(value: object, *, reference: Callable[[object], dict] | None = None) -> str:
    """:func:`encode` ``value`` and return the JSON text."""
    return json.dumps(encode(value, reference=reference), allow_nan=False, separators=(",", ":"))


def loads(text: str, *, resolve: Callable[[dict], object] | None = None) -> object:
    """Parse and :func:`decode` a document, refusing anything too large, too deep or malformed.

    Raises:
        WireError: saying what is wrong.
    """
    return decode(parse(text), resolve=resolve)


def parse(text: str) -> object:
    """Parse JSON text without decoding it, refusing anything too large or too deeply nested.

    Raises:
        WireError: saying what is wrong.
    """
    if type(text) is not str:
        raise WireError("a document must be text")
    if len(text) > MAX_CHARS:
        raise WireError(f"the document is larger than {MAX_CHARS // 1024 ** 2} MiB")
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as error:
        raise WireError("the document is nested too deeply") from error
    except ValueError as error:
        raise WireError(f"the document is not valid JSON ({str(error)[:80]})") from error
    return parsed


def _refuse_constant(name: str) -> None:
    raise WireError(f"bare {name} is not allowed; use a $float entry")
