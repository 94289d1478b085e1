"""What notebook test cells call: friendly checks, a shortcut guard and dual-mode helpers.

A test cell in an exercise notebook typically reads::

    from course_runtime.testing import check_close, forbid_shortcuts

    expected = reference_attention(q, k, v)        # the reference runs outside the guard
    with forbid_shortcuts("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"):
        actual = attention(q, k, v)                # the learner's function runs inside it
    check_close(actual, expected, name="attention output",
                hint="did you take the softmax over the last axis?")

Every check raises ``AssertionError`` with a message written for the learner: what was expected,
what was found, where, and (when the test author gives one) a hint about the likely mistake.

The same cell runs in two places. While a learner works, it runs in their kernel, next to their
code. When the notebook is graded, it runs in the referee, a trusted process (see
``autograder/engine/referee.py``): there, the learner's names are proxies (:mod:`course_runtime.remote`)
whose calls run in the learner's kernel and bring back plain data, so the references, the checks and
the verdict are out of the learner's reach. The helpers here work in both places:
:func:`forbid_shortcuts` and :func:`standing_in` apply to calls into the kernel, :func:`build`
constructs library objects (an optimizer, a reference model) where the learner's objects live, and
:func:`gradients` backpropagates through the learner's code where it runs.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import math
import random
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Sequence

import numpy
import torch
import torch.nn.functional
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from course_runtime import remote
from course_runtime.errors import ShortcutError, advice, shortcut_message

__all__ = [
    "ShortcutError",
    "check_answer",
    "check_close",
    "check_shape",
    "check_tensor",
    "created_holding",
    "explain_errors",
    "forbid_shortcuts",
    "build",
    "gradients",
    "in_kernel",
    "seeded",
    "shared_memory",
    "standing_in",
]

# --- Originals, captured once at import --------------------------------------------------------
# The checks below only ever call these names, never ``torch.xxx`` looked up at call time.
_TENSOR = torch.Tensor
_type = builtins.type
_isinstance = builtins.isinstance
_len = builtins.len
_tuple = builtins.tuple
_repr = builtins.repr
_as_tensor = torch.as_tensor
_allclose = torch.allclose
_abs = torch.abs
_sub = torch.sub
_mul = torch.mul
_add = torch.add
_gt = torch.gt
_isfinite = torch.isfinite
_isnan = torch.isnan
_logical_not = torch.logical_not
_logical_and = torch.logical_and
_logical_or = torch.logical_or
_eq = torch.eq
_nonzero = torch.nonzero
_argmax = torch.argmax
_where = torch.where
_zeros_like = torch.zeros_like
_count_nonzero = torch.count_nonzero
_unravel_index = torch.unravel_index
_detach = torch.Tensor.detach
_to = torch.Tensor.to
_size = torch.Tensor.size
_numel = torch.Tensor.numel
_reshape = torch.Tensor.reshape
_item = torch.Tensor.item
_tolist = torch.Tensor.tolist
_getitem = torch.Tensor.__getitem__
_dim = torch.Tensor.dim
_is_floating_point = torch.Tensor.is_floating_point
_is_complex = torch.Tensor.is_complex
_dtype_of = torch.Tensor.dtype.__get__
_device_of = torch.Tensor.device.__get__
_is_meta_of = torch.Tensor.is_meta.__get__
_untyped_storage = torch.Tensor.untyped_storage
_storage_address = torch.UntypedStorage.data_ptr
_DisableTorchFunction = torch._C.DisableTorchFunction
_hashable = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
             types.WrapperDescriptorType, types.MethodWrapperType, types.BuiltinMethodType)


#: Known wrong answers of a check: ``{hint: wrong_result}`` or a sequence of ``(hint, wrong_result)``.
Mistakes = Mapping[str, object] | Sequence[tuple[str, object]]


# --- Messages -----------------------------------------------------------------------------------


def _with_hint(message: str, hint: str | None) -> str:
    return f"{message}\nHint: {hint}" if hint else message


def _shape_str(shape: Sequence) -> str:
    dims = ["*" if d is None else str(int(d)) for d in shape]
    return "(" + ", ".join(dims) + ("," if _len(dims) == 1 else "") + ")"


def _index_str(index: Sequence[int]) -> str:
    return _shape_str(index) if _len(index) else "() (the tensor is a scalar)"


def _number_str(value: float) -> str:
    if _isinstance(value, complex):
        return _repr(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.6g}"


def _require_plain_tensor(value: object, name: str, hint: str | None) -> None:
    """Fail unless ``value``'s type is exactly ``torch.Tensor`` (no subclasses, no look-alikes)."""
    kind = _type(value)
    if kind is _TENSOR:
        return
    if _isinstance(value, _TENSOR):
        detail = (f"a {kind.__module__}.{kind.__qualname__}, a subclass of torch.Tensor; "
                  "return a plain tensor (for a parameter, use `.detach()`)")
    elif _isinstance(value, _tuple):
        detail = (f"a tuple of {_len(value)} item{'' if _len(value) == 1 else 's'}; return the tensor itself "
                  "(did you return several values where one was expected?)")
    elif value is None:
        detail = "None; did you forget the `return` statement?"
    elif _isinstance(value, numpy.ndarray):
        detail = "a NumPy array; keep working with torch tensors (e.g. `torch.from_numpy(...)`)"
    else:
        detail = f"a {kind.__module__}.{kind.__qualname__}"
    raise AssertionError(_with_hint(f"`{name}` should be a torch.Tensor, but it is {detail}.", hint))


def _plain_cpu(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return _to(_detach(tensor), device="cpu", dtype=dtype)


def _first_index(mask: torch.Tensor) -> tuple[int, ...]:
    """The index of the first True entry of a boolean tensor that has at least one."""
    return _tuple(int(i) for i in _tolist(_nonzero(mask))[0])


def _value_at(tensor: torch.Tensor, index: tuple[int, ...]) -> float | complex:
    return _item(_getitem(tensor, index) if index else tensor)


def _materialize(value: object) -> object:
    """A proxy of the learner's kernel (at grading time) replaced by its data; anything else as is."""
    return remote._materialize(value)


# --- Checks -------------------------------------------------------------------------------------


def check_tensor(x: object, *, name: str, dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None) -> None:
    """Check that ``x`` is a plain ``torch.Tensor``, optionally of a given dtype and device.

    Args:
        x: the value the learner's code produced.
        name: what the value is called in the exercise, used in the message.
        dtype: the required dtype, or None to accept any.
        device: the required device (``"cpu"``, ``"cuda"``, ``torch.device("cuda:0")``), or None to
            accept any. A device without an index matches every index of that type.

    Raises:
        AssertionError: with a message saying what is wrong.

    Example:
        >>> check_tensor(torch.zeros(2), name="mask", dtype=torch.float32)
    """
    x = _materialize(x)
    with _DisableTorchFunction():
        _require_plain_tensor(x, name, None)
        actual_dtype = _dtype_of(x)
        if dtype is not None and actual_dtype != dtype:
            raise AssertionError(
                f"`{name}` should have dtype {dtype}, but it has dtype {actual_dtype}."
                + (" Did you build it with Python integers, or forget `.float()`?"
                   if not actual_dtype.is_floating_point and dtype.is_floating_point else ""))
        if device is not None:
            wanted = torch.device(device)
            actual_device = _device_of(x)
            if actual_device.type != wanted.type or (
                    wanted.index is not None and actual_device.index != wanted.index):
                raise AssertionError(
                    f"`{name}` should be on device {wanted}, but it is on {actual_device}. "
                    "Create new tensors on the input's device, e.g. `torch.zeros(..., device=x.device)`.")


def check_shape(tensor: object, expected_shape: Sequence[int | None], *, name: str,
                hint: str | None = None) -> None:
    """Check that ``tensor`` is a plain ``torch.Tensor`` with the expected shape.

    Args:
        tensor: the value the learner's code produced.
        expected_shape: the required shape; ``None`` in a position accepts any size there.
        name: what the value is called in the exercise, used in the message.
        hint: an optional pointer to the likely mistake, appended to the message.

    Raises:
        AssertionError: naming both shapes and, when only some dimensions differ, which ones.

    Example:
        >>> check_shape(torch.zeros(2, 3, 4), (2, None, 4), name="scores")
    """
    tensor = _materialize(tensor)
    with _DisableTorchFunction():
        _require_plain_tensor(tensor, name, hint)
        actual = _tuple(int(d) for d in _size(tensor))
    expected = _tuple(None if d is None else int(d) for d in expected_shape)
    if _len(actual) != _len(expected):
        raise AssertionError(_with_hint(
            f"`{name}` should have shape {_shape_str(expected)} ({_len(expected)} dimensions), "
            f"but it has shape {_shape_str(actual)} ({_len(actual)} dimensions).", hint))
    wrong = [i for i, (a, e) in enumerate(zip(actual, expected)) if e is not None and a != e]
    if wrong:
        dims = ", ".join(str(i) for i in wrong)
        raise AssertionError(_with_hint(
            f"`{name}` should have shape {_shape_str(expected)}, but it has shape "
            f"{_shape_str(actual)} ({'dimensions' if _len(wrong) > 1 else 'dimension'} {dims} "
            f"{'differ' if _len(wrong) > 1 else 'differs'}).", hint))


def check_close(actual: object, expected: object, *, name: str = "output", atol: float = 1e-5,
                rtol: float = 1e-4, hint: str | None = None, mistakes: Mistakes | None = None) -> None:
    """Check that the learner's tensor matches the reference within a tolerance.

    The check runs in four steps, each with its own message: ``actual`` must be exactly a
    ``torch.Tensor`` (subclasses and look-alikes are refused), have the reference's shape, be finite
    where the reference is finite, and satisfy ``|actual - expected| <= atol + rtol * |expected|``
    everywhere. Values are compared in float64 on the CPU, so a float16 or CUDA result can be
    checked against a float32 CPU reference.

    Args:
        actual: the learner's result.
        expected: the reference result (a tensor, or anything ``torch.as_tensor`` accepts).
        name: what the value is called in the exercise, used in the message.
        atol: absolute tolerance.
        rtol: relative tolerance.
        hint: an optional pointer to the likely mistake, appended to the message, e.g.
            ``"did you take the softmax over the last axis?"``.
        mistakes: known wrong answers, ``{hint: wrong_result}`` (or a list of pairs): when the
            learner's result matches one of them within the tolerance, that hint is given instead
            of ``hint``. They are checked on every call, also when the answer is right: a wrong
            result equal to the reference or to another mistake is a mistake of the test, since
            its hint could never fire, and raises ``ValueError``; choose inputs that tell them apart.

    Raises:
        AssertionError: saying what differs and where.
        ValueError: if two entries of ``mistakes``, or one and the reference, cannot be told apart.

    Example:
        >>> check_close(torch.ones(2) / 2, torch.tensor([0.5, 0.5]), name="weights",
        ...             mistakes={"did you forget to normalise?": torch.ones(2)})
    """
    actual = _materialize(actual)
    if mistakes is None:
        return _check_close(actual, expected, name=name, atol=atol, rtol=rtol, hint=hint)
    table = _mistake_table(mistakes, expected, atol=atol, rtol=rtol)
    try:
        _check_close(actual, expected, name=name, atol=atol, rtol=rtol, hint=hint)
    except AssertionError:
        for mistake_hint, wrong in table:
            if _agrees(actual, wrong, atol=atol, rtol=rtol):
                _check_close(actual, expected, name=name, atol=atol, rtol=rtol, hint=mistake_hint)
        raise


def _agrees(a: object, b: object, *, atol: float, rtol: float) -> bool:
    """Whether two results have the same shape and agree within ``atol + rtol * |b|`` (NaN = NaN)."""
    with _DisableTorchFunction():
        if not (_isinstance(a, _TENSOR) and _isinstance(b, _TENSOR)) or _tuple(_size(a)) != _tuple(_size(b)):
            return False
        common = torch.complex128 if (_is_complex(a) or _is_complex(b)) else torch.float64
        return bool(_allclose(_plain_cpu(a, common), _plain_cpu(b, common), atol=atol, rtol=rtol,
                                   equal_nan=True))


def _mistake_table(mistakes: object, expected: object, *, atol: float, rtol: float) -> list[tuple[str, object]]:
    """The ``(hint, wrong result)`` pairs as tensors, after checking that each can be told apart."""
    pairs = list(mistakes.items()) if _isinstance(mistakes, Mapping) else list(mistakes)
    with _DisableTorchFunction():
        table = [(str(h), w if _isinstance(w, _TENSOR) else _as_tensor(w)) for h, w in pairs]
        reference = expected if _isinstance(expected, _TENSOR) else _as_tensor(expected)
    for i, (mistake_hint, wrong) in enumerate(table):
        if _agrees(wrong, reference, atol=atol, rtol=rtol):
            raise ValueError(f"check_close: the mistake {mistake_hint!r} gives the right answer on these "
                             "inputs, so it would pass; choose inputs that tell it apart")
        for other_hint, other in table[:i]:
            if _agrees(wrong, other, atol=atol, rtol=rtol):
                raise ValueError(f"check_close: the mistakes {other_hint!r} and {mistake_hint!r} give the "
                                 "same result on these inputs, so the second hint could never fire; "
                                 "choose inputs that tell them apart")
    return table


def _check_close(actual: object, expected: object, *, name: str, atol: float, rtol: float,
                 hint: str | None) -> None:
    with _DisableTorchFunction():
        _require_plain_tensor(actual, name, hint)
        if not _isinstance(expected, _TENSOR):
            expected = _as_tensor(expected)
        if _is_meta_of(actual):
            raise AssertionError(_with_hint(
                f"`{name}` is a meta tensor (it has a shape but no values); compute real values.", hint))
        check_shape(actual, _tuple(_size(expected)), name=name, hint=hint)

        if (_is_floating_point(expected) or _is_complex(expected)) and not (
                _is_floating_point(actual) or _is_complex(actual)):
            raise AssertionError(_with_hint(
                f"`{name}` should contain floating-point numbers like the reference "
                f"({_dtype_of(expected)}), but it has dtype {_dtype_of(actual)}. "
                "Did an integer or boolean operation sneak in?", hint))

        common = torch.complex128 if (_is_complex(expected) or _is_complex(actual)) else torch.float64
        a = _plain_cpu(actual, common)
        e = _plain_cpu(expected, common)
        total = int(_numel(a))
        if total == 0:
            return

        a_finite, e_finite = _isfinite(a), _isfinite(e)
        bad_nonfinite = _logical_and(_logical_not(a_finite), e_finite)
        count = int(_item(_count_nonzero(bad_nonfinite)))
        if count:
            where = _first_index(bad_nonfinite)
            value = _value_at(a, where)
            kind = "NaN" if value != value else "inf"
            raise AssertionError(_with_hint(
                f"`{name}` contains {count} non-finite value{'s' if count > 1 else ''} (NaN or inf) "
                f"where the reference is finite; the first is {kind} at index {_index_str(where)}. "
                "Look for a division by zero, the log of 0, an overflowing exp, or a fully masked row.",
                hint))
        # Where the reference is not finite, the learner must match it exactly (NaN with NaN).
        both_nan = _logical_and(_isnan(e), _isnan(a))
        nonfinite_mismatch = _logical_and(_logical_not(e_finite),
                                          _logical_not(_logical_or(both_nan, _eq(a, e))))
        if bool(_item(_count_nonzero(nonfinite_mismatch))):
            where = _first_index(nonfinite_mismatch)
            raise AssertionError(_with_hint(
                f"`{name}` differs from the reference at index {_index_str(where)}: you returned "
                f"{_number_str(_value_at(a, where))}, expected {_number_str(_value_at(e, where))}.", hint))

        both_finite = _logical_and(a_finite, e_finite)
        diff = _where(both_finite, _abs(_sub(a, e)), _zeros_like(_abs(a)))
        tolerance = _add(_mul(_abs(e), rtol), atol)
        n_bad = int(_item(_count_nonzero(_gt(diff, tolerance))))
        if n_bad:
            flat_worst = int(_item(_argmax(_reshape(diff, (-1,)))))
            if _dim(a):
                where = _tuple(int(i) for i in _unravel_index(_as_tensor(flat_worst), _size(a)))
            else:
                where = ()
            raise AssertionError(_with_hint(
                f"`{name}` has the wrong values: {n_bad} of {total} entries differ from the reference "
                f"by more than the tolerance (atol={atol:g}, rtol={rtol:g}).\n"
                f"The largest difference is {_number_str(float(_value_at(diff, where)))} at index "
                f"{_index_str(where)}: you returned {_number_str(_value_at(a, where))}, "
                f"expected {_number_str(_value_at(e, where))}.", hint))


def check_answer(answer: object, expected: str | int | float | bool, *, name: str,
                 hint: str | None = None, mistakes: Mapping[object, str] | None = None,
                 rel_tol: float = 0.0) -> None:
    """Check a quiz answer, refusing look-alikes whose comparisons always succeed.

    ``answer`` must be a ``str``, ``int``, ``float`` or ``bool`` (no subclasses, which could
    override ``==``, ``strip`` or ``lower``); for a numeric question a one-element tensor or a NumPy
    scalar is read as the number it holds. Strings are compared after ``strip().lower()``.

    Args:
        answer: the learner's answer.
        expected: the right answer.
        name: what the answer is called in the exercise, e.g. ``"answer_q1"``.
        hint: an optional pointer, appended to the message.
        mistakes: known wrong answers, ``{wrong_answer: hint}``; an answer equal to one of them gets
            that hint instead of ``hint``.
        rel_tol: for numbers, the relative difference accepted (0 asks for equality).

    Raises:
        AssertionError: if the answer has the wrong type or value.
        ValueError: if one of ``mistakes`` equals ``expected`` (a mistake of the test).

    Example:
        >>> check_answer(" B", "b", name="answer_q1")
        >>> check_answer(torch.tensor([0.25]), 0.25, name="answer_q2")
    """
    answer = _as_plain_answer(_materialize(answer), expected)
    kind = _type(answer)
    if kind not in (str, int, float, bool):
        raise AssertionError(_with_hint(
            f"`{name}` should be a plain str, int, float or bool, but it is {_describe_answer(answer)}.",
            hint))
    for wrong, wrong_hint in (mistakes or {}).items():
        if _same_answer(wrong, expected, rel_tol):
            raise ValueError(f"check_answer: the mistake {wrong!r} equals the right answer {expected!r}")
    if _same_answer(answer, expected, rel_tol):
        return
    for wrong, wrong_hint in (mistakes or {}).items():
        if _same_answer(answer, wrong, rel_tol):
            hint = wrong_hint
            break
    raise AssertionError(_with_hint(f"`{name}` is not correct.", hint))


def _as_plain_answer(answer: object, expected: object) -> object:
    """A one-element tensor or a NumPy scalar as the Python number it holds, for numeric questions."""
    if _type(expected) is str:
        return answer
    if _type(answer) is _TENSOR and _numel(answer) == 1 and not _is_meta_of(answer):
        return _item(answer)
    if _isinstance(answer, numpy.generic) and _type(answer).__module__ == "numpy" and answer.size == 1:
        return answer.item()
    return answer


def _describe_answer(answer: object) -> str:
    if _type(answer) is _TENSOR:
        return (f"a tensor of shape {_shape_str(_size(answer))}; give one number "
                "(e.g. `.item()` of a one-element tensor)")
    kind = _type(answer)
    return f"a {kind.__module__}.{kind.__qualname__}"


def _same_answer(answer: object, expected: object, rel_tol: float) -> bool:
    kind = _type(answer)
    if _type(expected) is str:
        return kind is str and str.lower(str.strip(answer)) == str.lower(str.strip(expected))
    if _type(expected) is bool or kind is bool:
        return kind is _type(expected) and answer is expected
    if kind not in (int, float):
        return False
    return math.isclose(float(answer), float(expected), rel_tol=rel_tol, abs_tol=0.0)


# --- The shortcut guard -------------------------------------------------------------------------



# What a forbidden built-in computes, down to the ATen operators. Forbidding a name (matched by its last
# parts, e.g. "softmax" in "torch.Tensor.softmax") switches off its whole family: every operator that
# computes the same thing (``kernels``: refused at dispatch, which also catches ``torch.ops.aten`` calls and
# built-ins that reach them some other way, e.g. ``torch.sparse.softmax`` or ``torch.instance_norm``), and
# the torch functions that decompose into ordinary operators before dispatch (``functions``, refused as
# called, e.g. ``torch.rms_norm(x - mean)``). ``backward`` also refuses every operator the autograd engine
# runs (``backward()``, ``torch.autograd.grad``, ``torch.func`` transforms), and ``torch._make_dual`` among
# the functions refuses forward-mode AD (``torch.func.jvp``, ``jacfwd``, ``torch.autograd.forward_ad``).
class _Family(typing.NamedTuple):
    public: str                      # the built-in named in the learner's message
    kernels: tuple[str, ...]         # names of ``torch.ops.aten`` operators
    functions: tuple[str, ...] = ()  # dotted names of torch functions that never reach a kernel of their own
    backward: bool = False


_ATTENTION_KERNELS = (
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_safe_softmax",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps",
    "_flash_attention_forward", "_efficient_attention_forward", "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd")
_ATTENTION_FUNCTIONS = ("torch.nn.functional.scaled_dot_product_attention",
                        "torch.nn.functional.multi_head_attention_forward")
_SOFTMAX = _Family("torch.softmax", (
    "_softmax", "softmax", "_log_softmax", "log_softmax", "special_softmax", "special_log_softmax",
    "_sparse_softmax", "_sparse_log_softmax", "_masked_softmax", "logsumexp", "special_logsumexp",
    "logcumsumexp", "_logcumsumexp", *_ATTENTION_KERNELS), _ATTENTION_FUNCTIONS)
_ATTENTION = _Family("torch.nn.functional.scaled_dot_product_attention", _ATTENTION_KERNELS, _ATTENTION_FUNCTIONS)
_MULTI_HEAD = _Family("torch.nn.MultiheadAttention", ("_native_multi_head_attention", "_transformer_encoder_layer_fwd"),
                      ("torch.nn.functional.multi_head_attention_forward",))
_NORM_FUNCTIONS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "instance_norm",
                   "batch_norm", "native_batch_norm", "rms_norm")
_LAYER_NORM = _Family("torch.nn.functional.layer_norm", (
    *_NORM_FUNCTIONS, "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "_batch_norm_with_update", "_batch_norm_with_update_functional",
    "_batch_norm_no_update", "_batch_norm_impl_index", "cudnn_batch_norm", "miopen_batch_norm", "batch_norm_elemt",
    "_fused_rms_norm", "_transformer_encoder_layer_fwd"),
    (*(f"torch.{name}" for name in _NORM_FUNCTIONS),
     *(f"torch.nn.functional.{name}" for name in ("layer_norm", "group_norm", "instance_norm", "batch_norm",
                                                  "rms_norm"))))
_GELU = _Family("torch.nn.functional.gelu", ("gelu", "_transformer_encoder_layer_fwd"), ("torch.nn.functional.gelu",))
_ENCODER_LAYER = _Family("torch.nn.TransformerEncoderLayer", ("_transformer_encoder_layer_fwd",))
_RNN = _Family("torch.nn.RNN", (
    "rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell", "lstm", "lstm_cell", "gru", "gru_cell",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "mkldnn_rnn_layer", "_cudnn_rnn", "miopen_rnn"),
    tuple(f"torch.{name}" for name in ("rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell", "lstm", "lstm_cell",
                                       "gru", "gru_cell")))
_AUTOGRAD = _Family("torch.autograd.grad", ("_make_dual",),
                    ("torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward", "torch._make_dual"),
                    backward=True)
_ATEN_KERNELS = {
    **dict.fromkeys(("softmax", "Softmax", "_softmax", "log_softmax", "LogSoftmax", "softmin", "Softmin",
                     "logsumexp", "logcumsumexp"), _SOFTMAX),
    "scaled_dot_product_attention": _ATTENTION,
    **dict.fromkeys(("multi_head_attention_forward", "MultiheadAttention"), _MULTI_HEAD),
    **dict.fromkeys(("layer_norm", "LayerNorm", "native_layer_norm", "group_norm", "GroupNorm", "instance_norm",
                     "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "batch_norm", "BatchNorm1d",
                     "BatchNorm2d", "BatchNorm3d", "rms_norm", "RMSNorm"), _LAYER_NORM),
    **dict.fromkeys(("gelu", "GELU"), _GELU),
    **dict.fromkeys(("TransformerEncoderLayer", "_transformer_encoder_layer_fwd"), _ENCODER_LAYER),
    **dict.fromkeys(("RNN", "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "rnn_tanh", "rnn_tanh_cell"), _RNN),
    **dict.fromkeys(("grad", "backward", "jacobian", "hessian", "vjp", "jvp", "hvp", "vhp", "jacrev", "jacfwd",
                     "linearize"), _AUTOGRAD),
}
# Tensor subclasses of PyTorch whose torch-function handling is PyTorch's own (no code runs in it).
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)


def _family(dotted_name: str) -> _Family | None:
    """The family of built-ins that computes what ``dotted_name`` computes, or None if none is known."""
    for part in reversed(dotted_name.split(".")):
        if part in _ATEN_KERNELS:
            return _ATEN_KERNELS[part]
    return None


def _kernel_message(dotted_name: str, public: str, reason: str | None) -> str:
    """What a learner reads when their code reaches a forbidden built-in's kernel without calling
    ``dotted_name`` itself (e.g. PyTorch's fused attention while the library's attention is off)."""
    # two whole sentences, not one with an optional clause: a translation's placeholder stands for some text
    switched_off = f"built-ins for this are switched off while your code runs; {reason or advice(dotted_name)}."
    if dotted_name == public:
        return (f"implement this yourself: your code reached the kernel of PyTorch's built-in `{public}` (called "
                f"directly or through an alias); {switched_off}")
    return (f"implement this yourself: your code reached the kernel of PyTorch's built-in `{public}` (called "
            f"directly or through an alias), which computes what `{dotted_name}` computes; {switched_off}")


def _refuse_subclasses(types: tuple) -> None:
    """Refuse a tensor subclass of the learner's with its own ``__torch_function__`` or ``__torch_dispatch__``:
    PyTorch runs that code with the guard's own mode paused, so it could call a forbidden built-in unseen."""
    for kind in types:
        if kind not in _PLAIN_TENSOR_TYPES:
            raise ShortcutError(
                f"your code used a tensor subclass with its own __torch_function__ or __torch_dispatch__ "
                f"(`{kind.__module__}.{kind.__qualname__}`) while the built-ins of this part are switched off; "
                "graded code works with plain tensors: return and compute with torch.Tensor objects")


def _operator(func: object) -> object:
    """The ``torch.ops.aten`` overload packet a call of ``func`` runs, or None for other callables."""
    if _type(func) is torch._ops.OpOverload:
        return func.overloadpacket
    return func if _type(func) is torch._ops.OpOverloadPacket else None


class _ForbidFunctions(TorchFunctionMode):
    """Refuse calls of the forbidden torch functions however they are reached (aliases included), and
    ``torch.ops.aten`` calls of forbidden operators (``operators``: overload packet -> message)."""

    def __init__(self, blocked: dict, operators: dict) -> None:
        super().__init__()
        self.blocked, self.operators = blocked, operators

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _refuse_subclasses(types)
        message = self.blocked.get(func) if _isinstance(func, _hashable) else None
        if message is None and self.operators:
            message = self.operators.get(_operator(func))
        if message is not None:
            raise ShortcutError(message)
        return func(*args, **(kwargs or {}))


class _ForbidKernels(TorchDispatchMode):
    """Refuse the aten kernels of forbidden built-ins, e.g. reached through ``torch.ops.aten``, and, with
    ``backward`` (a message), every kernel the autograd engine runs."""

    def __init__(self, blocked: dict, backward: str | None) -> None:
        super().__init__()
        self.blocked, self.backward = blocked, backward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        _refuse_subclasses(types)
        message = self.blocked.get(func.overloadpacket)
        if message is None and self.backward is not None and torch._C._current_graph_task_id() != -1:
            message = self.backward
        if message is not None:
            raise ShortcutError(message)
        return func(*args, **(kwargs or {}))


@functools.cache
def _family_targets(family: _Family) -> tuple[tuple, tuple]:
    """The ``torch.ops.aten`` overload packets of ``family`` that this PyTorch has, and its functions as
    PyTorch defines them. Computed once, when this module is imported (see below): a guard that is on
    already must not be mistaken for the functions it replaced."""
    operators = tuple(getattr(torch.ops.aten, name) for name in family.kernels if hasattr(torch.ops.aten, name))
    functions = []
    for dotted_name in family.functions:
        owner_name, _, attribute = dotted_name.rpartition(".")
        owner = importlib.import_module(owner_name) if owner_name != "torch.Tensor" else torch.Tensor
        value = getattr(owner, attribute, None)
        if _isinstance(value, _hashable):
            functions.append(value)
    return operators, tuple(functions)


for _known_family in set(_ATEN_KERNELS.values()):
    _family_targets(_known_family)


# Set by the grading agent (:func:`course_runtime.agent.install`): this process is a grading kernel,
# which holds only the reference modules its assignment builds on.
_PARTIAL_LIBRARY = [False]


def _resolve(dotted_name: str) -> tuple[object, str] | None:
    """Return ``(owner, attribute)`` for a dotted name such as ``"torch.Tensor.softmax"``, or None for
    a name of the reference library whose module this process does not have (a grading kernel holds
    only the modules its assignment builds on: nothing there can call the missing ones)."""
    parts = dotted_name.split(".")
    if _len(parts) < 2 or not all(parts):
        raise ValueError(f"forbid_shortcuts needs dotted names like 'torch.softmax', got {dotted_name!r}")
    owner: object = None
    consumed = 0
    for end in range(_len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError as error:
            if (parts[0] == "transformer_core" and (error.name or "").startswith("transformer_core")
                    and _PARTIAL_LIBRARY[0]):
                return None
            continue
        except ImportError:
            continue
        consumed = end
        break
    if owner is None:
        raise ValueError(f"forbid_shortcuts: cannot import any module named in {dotted_name!r}")
    for part in parts[consumed:-1]:
        try:
            owner = getattr(owner, part)
        except AttributeError:
            raise ValueError(f"forbid_shortcuts: {dotted_name!r} does not exist "
                             f"({'.'.join(parts[:consumed])} has no attribute {part!r})") from None
    if not hasattr(owner, parts[-1]):
        raise ValueError(f"forbid_shortcuts: {dotted_name!r} does not exist")
    return owner, parts[-1]


def _blocker(dotted_name: str, reason: str | None):
    message = shortcut_message(dotted_name, reason)

    def forbidden(*args, **kwargs):
        raise ShortcutError(message)

    forbidden.__name__ = dotted_name.rsplit(".", 1)[-1]
    forbidden.__qualname__ = f"forbidden {dotted_name}"
    forbidden.__doc__ = message
    return forbidden


@contextlib.contextmanager
def forbid_shortcuts(*dotted_names: str, reason: str | None = None) -> Iterator[None]:
    """Switch off library functions while a learner's code runs, so the exercise is really done.

    Inside the ``with`` block every named callable is replaced by one that raises
    :class:`ShortcutError` with an "implement this yourself" message. The notebook's own aliases of
    those callables (e.g. after ``from torch.nn.functional import softmax``) are switched off too,
    and so are calls that reach a torch function some other way (a default argument, a closure):
    a ``__torch_function__`` mode refuses the original functions, and a ``__torch_dispatch__`` mode
    refuses every kernel that computes what a known built-in computes (its family, see :data:`_ATEN_KERNELS`:
    softmax with logsumexp, sparse softmax and attention; the layer, batch, instance, group and RMS norms;
    attention; GELU; RNNs; autograd, forward-mode AD and ``torch.func``), which also catches
    ``torch.ops.aten`` calls. Tensor subclasses with their own ``__torch_function__`` or ``__torch_dispatch__``
    are refused while the block runs (PyTorch runs their code with the modes paused).

    What holds in which thread: the replaced callables and aliases hold in every thread of the process;
    the two modes are PyTorch's thread-local state, so they hold in the thread that enters the block and
    in the autograd engine's threads its backward passes run on (PyTorch carries the modes there), not in
    a thread the learner's code started itself (graded code may not import ``threading``,
    ``concurrent``, ``asyncio`` or ``multiprocessing``: see ``autograder/engine/policy.py``). Everything is
    restored when the block ends, also when it ends with an exception. Compute the reference answer
    *outside* the block. Also usable as a decorator.

    Args:
        *dotted_names: full names such as ``"torch.softmax"``, ``"torch.Tensor.softmax"``,
            ``"torch.nn.functional.scaled_dot_product_attention"``,
            ``"torch.nn.MultiheadAttention.forward"`` or
            ``"transformer_core.attention.scaled_dot_product_attention"``.
        reason: what to do instead, shown to the learner; a sensible default is chosen per name.

    Raises:
        ValueError: if a name cannot be resolved (a typo in the test, not the learner's fault).

    Example:
        >>> with forbid_shortcuts("torch.softmax"):
        ...     torch.softmax(torch.zeros(2), dim=0)
        Traceback (most recent call last):
        ShortcutError: implement this yourself: `torch.softmax` is switched off in this part; ...
    """
    if not dotted_names:
        raise ValueError("forbid_shortcuts needs at least one dotted name, e.g. 'torch.softmax'")
    resolved = [(name, _resolve(name)) for name in dotted_names]
    targets = [(name, *found) for name, found in resolved if found is not None]
    session = remote.current()
    if session is not None:  # at grading time the guard applies to calls into the learner's kernel
        with session.forbidding(dotted_names, reason):
            yield
        return
    main_namespace = getattr(sys.modules.get("__main__"), "__dict__", {})
    saved: list[tuple[object, str, object, bool]] = []
    saved_aliases: list[tuple[str, object]] = []
    blocked_functions: dict = {}
    blocked_operators: dict = {}
    backward = None
    families: dict[_Family, str] = {}
    for name in dotted_names:  # each family once, in the words of the first name that switches it off
        family = _family(name)
        if family is not None and family not in families:
            families[family] = _kernel_message(name, family.public, reason)
    for family, message in families.items():
        operators, functions = _family_targets(family)
        blocked_operators.update(dict.fromkeys(operators, message))
        blocked_functions.update(dict.fromkeys(functions, message))
        backward = backward or (message if family.backward else None)
    modes = contextlib.ExitStack()
    try:
        for name, owner, attribute in targets:
            own = _isinstance(owner, (type, types.ModuleType)) and attribute in vars(owner)
            original = getattr(owner, attribute)
            blocker = _blocker(name, reason)
            saved.append((owner, attribute, original, own or not _isinstance(owner, type)))
            if _isinstance(original, _hashable):
                blocked_functions[original] = blocker.__doc__
            setattr(owner, attribute, blocker)
            for alias, value in list(main_namespace.items()):
                if value is original and not alias.startswith("__"):
                    saved_aliases.append((alias, value))
                    main_namespace[alias] = blocker
        modes.enter_context(_ForbidFunctions(blocked_functions, blocked_operators))
        if blocked_operators or backward:  # a dispatch mode slows every operator: only where it refuses some
            modes.enter_context(_ForbidKernels(blocked_operators, backward))
        yield
    finally:
        modes.close()
        for alias, value in reversed(saved_aliases):
            main_namespace[alias] = value
        for owner, attribute, original, set_back in reversed(saved):
            if set_back:
                setattr(owner, attribute, original)
            else:
                delattr(owner, attribute)


# --- Errors raised inside the learner's code ----------------------------------------------------


@contextlib.contextmanager
def explain_errors(hint: str, *, call: str = "your code",
                   kinds: tuple[type[BaseException], ...] = (RuntimeError, ValueError, TypeError, IndexError)
                   ) -> Iterator[None]:
    """Turn an error raised inside the learner's code into a test failure that carries a hint.

    Many mistakes do not produce a wrong value but an exception deep inside the learner's function:
    ``k.T`` on a batched tensor ends in a broadcasting error, a mask of the wrong shape in a size
    mismatch. The hint a test gives for the wrong value should then reach the learner too. Failed
    checks (``AssertionError``), switched-off shortcuts (:class:`ShortcutError`) and the
    ``NotImplementedError`` of a part not written yet pass through unchanged.

    Args:
        hint: the likely mistake, appended to the error's own message.
        call: what was running, e.g. ``"attention(q, k, v) with a batch of 2"``.
        kinds: the exception types to explain.

    Raises:
        AssertionError: ``"<call> raised <Type>: <message>"`` followed by the hint.

    Example:
        >>> with explain_errors("use k.transpose(-2, -1), not k.T", call="scores(q, k)"):
        ...     torch.zeros(2, 3, 4) @ torch.zeros(2, 3, 4).T
        Traceback (most recent call last):
        AssertionError: scores(q, k) raised RuntimeError: ...
    """
    try:
        yield
    except (ShortcutError, NotImplementedError):       # a switched-off built-in; a part not written yet
        raise
    except kinds as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else "(no message)"
        kind = next((base.__name__ for base in _type(error).__mro__ if base.__module__ == "builtins"),
                    _type(error).__name__)
        raise AssertionError(_with_hint(f"{call} raised {kind}: {detail}", hint)) from None


# --- Seeding ------------------------------------------------------------------------------------


@contextlib.contextmanager
def seeded(seed: int = 0) -> Iterator[None]:
    """Seed Python, NumPy and torch (CPU and CUDA) for a block, then restore the previous states.

    Tests use it so that their random inputs are the same on every run without changing the random
    stream of the learner's notebook.

    Args:
        seed: the seed for all three generators.

    Example:
        >>> with seeded(0):
        ...     x = torch.randn(3)
    """
    python_state = random.getstate()
    numpy_state = numpy.random.get_state()
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        numpy.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


# --- Helpers that work next to the learner's code and at grading time ----------------------------


@contextlib.contextmanager
def standing_in(**replacements) -> Iterator[None]:
    """Put reference versions of notebook functions in place while a block runs.

    A test uses it to grade one piece on its own: while it checks ``attention``, a reference
    ``attention_scores`` stands in for the learner's, so a mistake in an earlier part costs no
    points twice. At grading time the stand-ins are sent to the learner's kernel as source code, so
    define them with ``def`` or ``class`` at the top level of the visible part of a test cell (the
    learner sees the same code in the released notebook), using only names the notebook defines.

    Args:
        **replacements: notebook name -> function or class to use instead while the block runs.

    Example:
        >>> def _ref_scores(q, k):
        ...     return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        >>> with standing_in(attention_scores=_ref_scores):
        ...     pass  # attention(q, k, v) now uses _ref_scores
    """
    session = remote.current()
    if session is not None:
        with session.standing_in(replacements):
            yield
        return
    namespace = sys.modules["__main__"].__dict__
    missing = object()
    saved = {name: namespace.get(name, missing) for name in replacements}
    namespace.update(replacements)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def build(dotted_name: str, *args, **kwargs) -> object:
    """Call a torch or course-library callable where the learner's objects live.

    Next to the learner's code this is just ``torch.optim.SGD(...)``; at grading time the object is
    built in the learner's kernel, so it can be handed to their functions (an optimizer over their
    model's parameters, a reference module their code should accept).

    Args:
        dotted_name: e.g. ``"torch.optim.SGD"`` or ``"transformer_core.models.DecoderOnlyLM"``.
        *args, **kwargs: passed on; at grading time they must be data or the learner's objects.

    Example:
        >>> layer = build("torch.nn.Linear", 4, 2, bias=False)
    """
    session = remote.current()
    if session is not None:
        return session.call({"$import": dotted_name}, args, kwargs)
    owner, attribute = _resolve(dotted_name)
    return getattr(owner, attribute)(*args, **kwargs)


def in_kernel(function):
    """The test's own helper ``function``, to be run where the learner's objects live.

    Next to the learner's code this returns ``function`` itself. At grading time it returns a
    callable that sends the function's source to the learner's kernel and runs it there, with the
    notebook's globals; its arguments may be the learner's objects and its result comes back as
    data. Use it for checks of *how* something is stored, e.g. whether two tensors share memory.
    Define ``function`` with ``def`` at the top level of the visible part of a test cell.

    Example:
        >>> def _shares_memory(a, b):
        ...     return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        >>> in_kernel(_shares_memory)(torch.zeros(2), torch.zeros(2))
        False
    """
    session = remote.current()
    if session is None:
        return function
    return lambda *args, **kwargs: session.call(function, args, kwargs)


def gradients(function, *inputs, weights: torch.Tensor | None = None, module=None):
    """Run ``function(*inputs)`` and backpropagate ``sum(output * weights)`` where it runs.

    Args:
        function: the learner's function or module.
        *inputs: its arguments; floating-point tensors among them get gradients (copies are used,
            the caller's tensors are not changed).
        weights: the gradient of the loss with respect to the output (default: all ones, i.e.
            the loss is ``output.sum()``). When ``function`` returns a tuple, its first item counts.
        module: a module whose parameters' gradients are also wanted (usually ``function`` itself).

    Returns:
        ``(output, input_grads, parameter_grads)``: the detached output; one gradient (or None) per
        input; ``{name: gradient or None}`` for ``module``'s parameters (None without ``module``).

    Example:
        >>> out, (grad_x,), _ = gradients(torch.tanh, torch.zeros(3))
        >>> grad_x
        tensor([1., 1., 1.])
    """
    session = remote.current()
    if session is not None and (_type(function) is remote.RemoteObject or _type(module) is remote.RemoteObject):
        return build(f"{__name__}.gradients", function, *inputs, weights=weights, module=module)
    leaves = [_detach(x).clone().requires_grad_(True)
              if _isinstance(x, _TENSOR) and (_is_floating_point(x) or _is_complex(x)) else x for x in inputs]
    if module is not None:
        module.zero_grad(set_to_none=True)
    with torch.enable_grad():
        output = function(*leaves)
        main = output[0] if _isinstance(output, _tuple) else output
        if not _isinstance(main, _TENSOR):
            raise AssertionError(f"the function should return a tensor, but it returned {_type(main).__name__}")
        if not main.requires_grad:
            raise AssertionError("the output does not depend on the inputs through operations that keep "
                                 "gradients (did you use .detach(), .item(), .numpy() or torch.no_grad()?)")
        loss = (main * (weights if weights is not None else torch.ones_like(main))).sum()
        loss.backward()
    detached = (_tuple(_detach(o) if _isinstance(o, _TENSOR) else o for o in output)
                if _isinstance(output, _tuple) else _detach(output))
    grads = _tuple(x.grad if _isinstance(x, _TENSOR) and x.requires_grad else None for x in leaves)
    params = None if module is None else {name: (None if p.grad is None else _detach(p.grad).clone())
                                           for name, p in module.named_parameters()}
    return detached, grads, params


class _CreatedWatch(TorchDispatchMode):
    """Notes the shape of the first tensor an operation creates that holds an (a x b) matrix."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__()
        self.a, self.b, self.found = a, b, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if _isinstance(out, (_tuple, list)) else (out,)):
            if self.found is None and _isinstance(t, _TENSOR) and self._holds([int(d) for d in _size(t)]):
                self.found = _tuple(int(d) for d in _size(t))
        return out

    def _holds(self, dims: list[int]) -> bool:
        if self.a * self.b in dims:
            return True
        if self.a not in dims:
            return False
        dims.remove(self.a)
        return self.b in dims


def created_holding(sizes: tuple[int, int], function, *args, **kwargs) -> tuple[object, tuple[int, ...] | None]:
    """Call ``function(*args, **kwargs)`` where it runs and watch every tensor its operations create.

    A test of a memory-saving algorithm uses it to check that a matrix the algorithm must never hold is
    never created: blockwise attention never builds the (n_q x n_k) score matrix. A created tensor holds
    an (a x b) matrix when a and b are two of its dimensions, or a * b is one (the matrix flattened); choose
    test sizes that no honest tensor has (for attention: n_q, n_k, d, d_v and the block size all
    different). At grading time the watch runs in the learner's kernel, under the shortcut guard of the
    ``forbid_shortcuts`` blocks around the call, and only the result and the verdict come back.

    Args:
        sizes: ``(a, b)``, the matrix's two sizes.
        function: the learner's function; ``*args, **kwargs`` are passed to it.

    Returns:
        ``(result, shape)``: the function's result, and the shape of the first created tensor that holds
        the matrix, or None.

    Example:
        >>> created_holding((3, 5), torch.matmul, torch.zeros(3, 2), torch.zeros(2, 5))[1]
        (3, 5)
    """
    if remote.current() is not None:
        return build(f"{__name__}.created_holding", sizes, function, *args, **kwargs)
    watch = _CreatedWatch(*(int(n) for n in sizes))
    with watch:
        result = function(*args, **kwargs)
    return result, watch.found


def shared_memory(function, *args, **kwargs) -> tuple[object, tuple[tuple[int, ...], ...]]:
    """Call ``function(*args, **kwargs)`` where it runs and tell which results share memory with ``args``.

    A result that is an argument itself, or a view of one, changes when the caller writes into the
    argument: a test that asks for new tensors checks it here, since at grading time the results come
    back from the learner's kernel as copies, which share memory with nothing.

    Returns:
        ``(result, shared)``: the function's result, and for each of its items (a tuple result; any
        other result is one item) the positions in ``args`` of the tensors whose memory the item shares,
        empty for a new tensor or anything that is not a tensor.

    Example:
        >>> x = torch.zeros(2)
        >>> shared_memory(lambda a, b: (a[:1], b.clone()), x, x)[1]
        ((0, 1), ())
    """
    if remote.current() is not None:
        return build(f"{__name__}.shared_memory", function, *args, **kwargs)
    result = function(*args, **kwargs)

    def address(value: object) -> int:
        return _storage_address(_untyped_storage(value)) if _isinstance(value, _TENSOR) else 0

    addresses = [address(a) for a in args]
    items = result if _isinstance(result, _tuple) else (result,)
    return result, _tuple(_tuple(i for i, a in enumerate(addresses) if a and a == address(item)) for item in items)
