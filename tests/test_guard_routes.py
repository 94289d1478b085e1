"""Every public route to a forbidden computation the course knows of is blocked, and honest code is not.

The shortcut guard (:func:`course_runtime.testing.forbid_shortcuts`) switches off a part's built-ins by
family, down to the ATen operators. For each family used by an exercise, these tests take the part's own
list of names and try every route the course knows of: the function, its aliases, ``torch.ops.aten``,
other built-ins that compute the same thing (sparse softmax, ``exp(s - logsumexp(s))``, instance, batch,
group and RMS norms, fused attention, forward-mode AD, ``torch.func``), and tensor subclasses. The honest
equivalents (softmax from exp and sum, layer norm from mean and var, attention written out, the chain
rule) must still run, gradients included.

The second half runs the grading agent (:mod:`course_runtime.agent`) in this process with a fake notebook
as ``__main__``, as the kernel would: the guard must cover the learner's code for as long as any of it runs
for a test, from the call through the encoding of its result to every later request, until ``release``.
"""

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import fake_main

from course_runtime import agent, wire
from course_runtime.errors import ShortcutError
from course_runtime.testing import forbid_shortcuts

# The parts' own lists (the test cells of solutions/0N-*/...ipynb).
SOFTMAX_NAMES = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.special.softmax",
                 "torch._softmax", "torch.log_softmax", "torch.nn.functional.log_softmax",
                 "torch.Tensor.log_softmax", "torch.nn.functional.scaled_dot_product_attention")
LOGSUMEXP_NAMES = SOFTMAX_NAMES + ("torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp")
ATTENTION_NAMES = ("torch.nn.functional.scaled_dot_product_attention",)
NORM_NAMES = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
              "torch.nn.LayerNorm.forward", "torch.nn.functional.group_norm", "torch.group_norm",
              "torch.nn.functional.instance_norm", "torch.nn.functional.batch_norm", "torch.batch_norm",
              "torch.nn.functional.rms_norm")
GELU_NAMES = ("torch.nn.functional.gelu", "torch._C._nn.gelu", "torch.nn.GELU.forward")
GRAD_NAMES = ("torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward",
              "torch.autograd.functional.jacobian", "torch.autograd.functional.vjp", "torch.func.jacrev",
              "torch.func.jacfwd", "torch.func.vjp", "torch.func.grad", "torch.nn.RNN.forward", "torch.rnn_tanh")
RNN_NAMES = ("torch.nn.RNN.forward", "torch.nn.RNNCell.forward", "torch.nn.LSTM.forward", "torch.nn.GRU.forward",
             "torch.rnn_tanh", "torch.rnn_tanh_cell")

torch.manual_seed(0)
S = torch.randn(3, 5)                    # scores (rows, keys)
Q, K, V = torch.randn(3, 2, 4, 8).unbind(0)   # (batch 2, tokens 4, d 8) each
X = torch.randn(2, 4, 8)                 # (batch, tokens, features) for the norms
H = torch.randn(6)                       # a state (H,)
W = torch.randn(6, 6) / 3                # recurrent weights (H, H)


def _aliased(function):
    """``function`` reached through a default argument, as a learner's helper might hold it."""
    def call(*args, _f=function, **kwargs):
        return _f(*args, **kwargs)
    return call


def _mha(need_weights: bool):
    layer = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    with torch.no_grad():
        return layer(X, X, X, need_weights=need_weights)


SOFTMAX_ROUTES = {
    "torch.softmax": lambda: torch.softmax(S, -1),
    "Tensor.softmax": lambda: S.softmax(-1),
    "F.softmax": lambda: F.softmax(S, -1),
    "alias in a default argument": lambda: _aliased(torch.softmax)(S, -1),
    "torch.ops.aten._softmax": lambda: torch.ops.aten._softmax(S, -1, False),
    "torch.ops.aten.softmax.int": lambda: torch.ops.aten.softmax.int(S, -1),
    "nn.Softmax": lambda: torch.nn.Softmax(-1)(S),
    "F.softmin of -s": lambda: F.softmin(-S, -1),
    "log_softmax then exp": lambda: torch.log_softmax(S, -1).exp(),
    "F.cross_entropy": lambda: F.cross_entropy(S, torch.zeros(3, dtype=torch.long)),
    "torch.sparse.softmax on COO": lambda: torch.sparse.softmax(S.to_sparse(), -1).to_dense(),
    "torch.sparse.log_softmax on COO": lambda: torch.sparse.log_softmax(S.to_sparse(), -1).to_dense(),
    "torch.masked.softmax": lambda: torch.masked.softmax(S, -1, mask=torch.ones(3, 5, dtype=torch.bool)),
    "exp(s - logsumexp(s))": lambda: torch.exp(S - S.logsumexp(-1, keepdim=True)),
    "exp(s - logsumexp) via aten": lambda: torch.exp(S - torch.ops.aten.logsumexp(S, [-1], True)),
    "exp(s - logcumsumexp(s)[-1])": lambda: torch.exp(S - S.logcumsumexp(-1)[:, -1:]),
    "Categorical(logits).probs": lambda: torch.distributions.Categorical(logits=S).probs,
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(Q, K, V),
    "SDPA through aten": lambda: torch.ops.aten.scaled_dot_product_attention(Q, K, V),
    "SDPA flash kernel": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(Q[None], K[None],
                                                                                             V[None]),
    "nn.MultiheadAttention with weights": lambda: _mha(True),
    "nn.MultiheadAttention fused": lambda: _mha(False),
}
ATTENTION_ROUTES = {
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(Q, K, V),
    "alias in a default argument": lambda: _aliased(F.scaled_dot_product_attention)(Q, K, V, is_causal=True),
    "SDPA through aten": lambda: torch.ops.aten.scaled_dot_product_attention(Q, K, V),
    "SDPA math kernel": lambda: torch.ops.aten._scaled_dot_product_attention_math(Q, K, V),
    "SDPA flash kernel": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(Q[None], K[None],
                                                                                             V[None]),
    "nn.MultiheadAttention with weights": lambda: _mha(True),
    "nn.MultiheadAttention fused": lambda: _mha(False),
}
_C = X.transpose(1, 2).contiguous()      # (batch, features, tokens): the norms over channels, per token


def _per_token(tensor: torch.Tensor) -> torch.Tensor:
    """(batch * tokens, features): each token a row, as batch norm normalises over rows."""
    return tensor.reshape(-1, 8).T.contiguous()


_rms_norm = torch.rms_norm  # an alias taken before any guard is on


class _NormalisedWhenRead(torch.Tensor):
    """A tensor subclass whose ``detach()`` gives the layer norm of its values (through RMS norm)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            plain = args[0].as_subclass(torch.Tensor)
            if func is torch.Tensor.detach:
                return _rms_norm(plain - plain.mean(-1, keepdim=True), (8,))
            return func(plain, *args[1:], **(kwargs or {}))


NORM_ROUTES = {
    "F.layer_norm": lambda: F.layer_norm(X, (8,)),
    "nn.LayerNorm": lambda: torch.nn.LayerNorm(8)(X),
    "alias in a default argument": lambda: _aliased(F.layer_norm)(X, (8,)),
    "torch.ops.aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(X, [8], None, None, 1e-5),
    "torch.instance_norm": lambda: torch.instance_norm(_C.reshape(8, 8, 1).transpose(0, 1).contiguous(), None,
                                                       None, None, None, True, 0.1, 1e-5, False),
    "F.instance_norm": lambda: F.instance_norm(X.reshape(8, 8, 1).transpose(1, 2)),
    "nn.InstanceNorm1d": lambda: torch.nn.InstanceNorm1d(1)(X.reshape(8, 1, 8)),
    "F.batch_norm": lambda: F.batch_norm(_per_token(X).T, None, None, training=True),
    "torch.native_batch_norm": lambda: torch.native_batch_norm(_per_token(X), None, None, None, None, True,
                                                               0.1, 1e-5),
    "aten._native_batch_norm_legit": lambda: torch.ops.aten._native_batch_norm_legit(_per_token(X), None, None,
                                                                                      True, 0.1, 1e-5),
    "aten._native_batch_norm_legit_no_training": lambda: torch.ops.aten._native_batch_norm_legit_no_training(
        _per_token(X), None, None, torch.zeros(8), torch.ones(8), 0.1, 1e-5),
    "F.group_norm": lambda: F.group_norm(X.reshape(8, 8, 1), 1),
    "torch.native_group_norm": lambda: torch.native_group_norm(X.reshape(8, 8, 1), None, None, 8, 8, 1, 1, 1e-5),
    "nn.GroupNorm": lambda: torch.nn.GroupNorm(1, 8)(X.reshape(8, 8)),
    "F.rms_norm(x - mean)": lambda: F.rms_norm(X - X.mean(-1, keepdim=True), (8,)),
    "torch.rms_norm(x - mean)": lambda: torch.rms_norm(X - X.mean(-1, keepdim=True), (8,)),
    "aten.rms_norm(x - mean)": lambda: torch.ops.aten.rms_norm(X - X.mean(-1, keepdim=True), [8]),
    "nn.RMSNorm(x - mean)": lambda: torch.nn.RMSNorm(8)(X - X.mean(-1, keepdim=True)),
    "a tensor subclass that normalises when read": lambda: X.as_subclass(_NormalisedWhenRead).detach(),
    "nn.TransformerEncoderLayer fused": lambda: torch.no_grad()(
        lambda: torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()(X))(),
}
GELU_ROUTES = {
    "F.gelu": lambda: F.gelu(X),
    "nn.GELU(tanh)": lambda: torch.nn.GELU("tanh")(X),
    "alias in a default argument": lambda: _aliased(F.gelu)(X),
    "torch.ops.aten.gelu": lambda: torch.ops.aten.gelu(X),
}


def _step(h: torch.Tensor) -> torch.Tensor:
    """One RNN step without input, (H,) -> (H,)."""
    return torch.tanh(h @ W.T)


def _dual_tangent(make_dual=None) -> torch.Tensor:
    """The forward-mode derivative of ``_step`` at ``H`` along ones, (H,), with a dual tensor made by
    ``make_dual(primal, tangent, level)`` (default: ``torch.autograd.forward_ad.make_dual``)."""
    import torch.autograd.forward_ad as forward_ad

    with forward_ad.dual_level() as level:
        dual = forward_ad.make_dual(H, torch.ones(6)) if make_dual is None else make_dual(H, torch.ones(6), level)
        return forward_ad.unpack_dual(_step(dual)).tangent


def _engine_backward() -> tuple:
    h = H.clone().requires_grad_(True)
    out = _step(h).sum()
    return torch.autograd.Variable._execution_engine.run_backward((out,), (torch.ones(()),), False, False, (h,),
                                                                   False)


JACOBIAN_ROUTES = {
    "torch.autograd.grad": lambda: torch.autograd.grad(_step(h := H.clone().requires_grad_(True)).sum(), h),
    "alias of torch.autograd.grad": lambda: _aliased(torch.autograd.grad)(
        _step(h := H.clone().requires_grad_(True)).sum(), h),
    "Tensor.backward": lambda: _step(H.clone().requires_grad_(True)).sum().backward(),
    "the autograd engine directly": _engine_backward,
    "autograd.functional.jacobian": lambda: torch.autograd.functional.jacobian(_step, H),
    "autograd.functional.jacobian forward-mode": lambda: torch.autograd.functional.jacobian(
        torch.tanh, H, strategy="forward-mode", vectorize=True),
    "autograd.functional.jvp": lambda: torch.autograd.functional.jvp(_step, H, torch.ones(6)),
    "autograd.functional.hessian": lambda: torch.autograd.functional.hessian(lambda h: _step(h).sum(), H),
    "torch.func.jacrev": lambda: torch.func.jacrev(_step)(H),
    "torch.func.jacfwd": lambda: torch.func.jacfwd(_step)(H),
    "torch.func.vjp": lambda: torch.func.vjp(_step, H)[1](torch.ones(6)),
    "torch.func.jvp": lambda: torch.func.jvp(_step, (H,), (torch.ones(6),)),
    "torch.func.grad": lambda: torch.func.grad(lambda h: _step(h).sum())(H),
    "torch.func.hessian": lambda: torch.func.hessian(lambda h: _step(h).sum())(H),
    "torch.func.linearize": lambda: torch.func.linearize(_step, H)[1](torch.ones(6)),
    "torch.autograd.forward_ad": lambda: _dual_tangent(),
    "torch.ops.aten._make_dual": lambda: _dual_tangent(torch.ops.aten._make_dual),
}
RNN_ROUTES = {
    "nn.RNN": lambda: torch.nn.RNN(8, 6, batch_first=True)(X),
    "nn.RNNCell": lambda: torch.nn.RNNCell(8, 6)(X[0]),
    "nn.LSTM": lambda: torch.nn.LSTM(8, 6, batch_first=True)(X),
    "nn.GRUCell": lambda: torch.nn.GRUCell(8, 6)(X[0]),
    "torch.rnn_tanh_cell": lambda: torch.rnn_tanh_cell(X[0], torch.zeros(4, 6), torch.randn(6, 8), W),
    "alias of torch.rnn_tanh": lambda: _aliased(torch.rnn_tanh)(X, torch.zeros(1, 2, 6), [torch.randn(6, 8), W],
                                                                False, 1, 0.0, False, False, True),
    "torch.ops.aten.rnn_tanh_cell": lambda: torch.ops.aten.rnn_tanh_cell(X[0], torch.zeros(4, 6),
                                                                          torch.randn(6, 8), W),
}
FAMILIES = {
    "softmax (02)": (SOFTMAX_NAMES, SOFTMAX_ROUTES),
    "softmax and logsumexp (09)": (LOGSUMEXP_NAMES, SOFTMAX_ROUTES),
    "attention (03)": (ATTENTION_NAMES, ATTENTION_ROUTES),
    "layer norm (05)": (NORM_NAMES, NORM_ROUTES),
    "GELU (05)": (GELU_NAMES, GELU_ROUTES),
    "Jacobians (01)": (GRAD_NAMES, JACOBIAN_ROUTES),
    "RNN (01)": (RNN_NAMES, RNN_ROUTES),
}
CASES = [pytest.param(names, route, id=f"{family}: {label}")
         for family, (names, routes) in FAMILIES.items() for label, route in routes.items()]


@pytest.mark.parametrize(("names", "route"), CASES)
def test_every_known_route_to_a_forbidden_computation_is_blocked(names, route):
    route()  # the route works outside the guard: it is a real route, not a typo
    with forbid_shortcuts(*names):
        with pytest.raises(ShortcutError, match="implement this yourself|tensor subclass"):
            route()
    route()  # and again once the guard is gone


def test_in_a_thread_of_its_own_the_replaced_callables_hold_and_the_modes_do_not():
    """What the guard's docstring promises per thread (learner code may not start threads at all)."""
    import threading

    seen = {}

    def elsewhere():
        for label, route in (("torch.softmax", lambda: torch.softmax(S, -1)),
                             ("aten", lambda: torch.ops.aten._softmax(S, -1, False))):
            try:
                route()
                seen[label] = "ran"
            except ShortcutError:
                seen[label] = "refused"

    with forbid_shortcuts(*SOFTMAX_NAMES):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert seen == {"torch.softmax": "refused", "aten": "ran"}


def _softmax(s: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis written out, (..., n) -> (..., n)."""
    e = torch.exp(s - s.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    """Layer norm over the last axis from mean and variance, (..., d) -> (..., d)."""
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention written out, (B, n, d) each -> (B, n, d)."""
    return _softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5) @ v


def _chain_rule_norms(h: torch.Tensor) -> torch.Tensor:
    """01's honest Jacobian norms of three steps of ``_step`` from ``h``, (H,) -> (3,)."""
    states = [h]
    for _ in range(3):
        states.append(_step(states[-1]))
    J, norms = torch.eye(6), []
    for t in range(3, 0, -1):
        norms.append(torch.linalg.matrix_norm(J, ord=2))
        J = J @ torch.diag(1 - states[t] ** 2) @ W
    return torch.stack(norms)


def _with_gradient(function, *inputs: torch.Tensor) -> tuple:
    """``function(*inputs)`` and the gradient of its sum with respect to the first input."""
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    out = function(*leaves)
    out.sum().backward()
    return out.detach(), leaves[0].grad


HONEST = [
    pytest.param(LOGSUMEXP_NAMES, lambda: _with_gradient(_softmax, S), lambda: (torch.softmax(S, -1), None),
                 id="softmax from exp and sum, with its gradient"),
    pytest.param(ATTENTION_NAMES, lambda: (_attention(Q, K, V),), lambda: (F.scaled_dot_product_attention(Q, K, V),),
                 id="attention written out"),
    pytest.param(ATTENTION_NAMES, lambda: (torch.softmax(Q @ K.transpose(-2, -1) / 8 ** 0.5, -1) @ V,),
                 lambda: (F.scaled_dot_product_attention(Q, K, V),), id="attention with torch.softmax (allowed in 03)"),
    pytest.param(NORM_NAMES, lambda: _with_gradient(_layer_norm, X), lambda: (F.layer_norm(X, (8,)), None),
                 id="layer norm from mean and var, with its gradient"),
    pytest.param(NORM_NAMES, lambda: (torch.var_mean(X, -1)[0],), lambda: (X.var(-1),), id="torch.var_mean"),
    pytest.param(GELU_NAMES, lambda: (X * 0.5 * (1 + torch.erf(X / 2 ** 0.5)),), lambda: (F.gelu(X),),
                 id="GELU from erf"),
    pytest.param(GRAD_NAMES, lambda: (_chain_rule_norms(H),),
                 lambda: (torch.stack([torch.linalg.matrix_norm(torch.func.jacrev(
                     lambda h, n=n: _n_steps(h, n))(_n_steps(H, 3 - n)), ord=2) for n in range(3)]),),
                 id="Jacobian norms by the chain rule"),
]


def _n_steps(h: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` steps of ``_step`` from ``h``, (H,) -> (H,)."""
    for _ in range(n):
        h = _step(h)
    return h


@pytest.mark.parametrize(("names", "honest", "reference"), HONEST)
def test_honest_equivalents_run_under_the_guard(names, honest, reference):
    expected = reference()
    with forbid_shortcuts(*names):
        actual = honest()
    for mine, theirs in zip(actual, expected):
        if theirs is not None:
            torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)
    if len(actual) > 1:
        assert actual[1] is not None and torch.isfinite(actual[1]).all(), "the gradient of the honest code is missing"


# --- Through the grading agent -------------------------------------------------------------------

LEARNER_CODE = '''
import torch

_sm = torch.softmax                           # aliases taken before any guard is on
_aten_sm = torch.ops.aten._softmax.default


def honest(s):
    e = torch.exp(s - s.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


class Lazy(torch.Tensor):
    """Looks like the scores; its softmax is taken when anyone reads it."""
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        plain = [a.as_subclass(torch.Tensor) if isinstance(a, Lazy) else a for a in args]
        with torch._C.DisableTorchFunctionSubclass():
            return _sm(plain[0], -1) if func is torch.Tensor.detach else func(*plain, **(kwargs or {}))


class Wrapped(torch.Tensor):
    """A wrapper subclass whose __torch_dispatch__ takes the softmax of what it holds."""
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        inner = [a.inner if isinstance(a, Wrapped) else a for a in args]
        return _aten_sm(inner[0], -1, False)


class Rows(tuple):
    """A tuple whose items are computed when it is iterated."""
    def __iter__(self):
        return iter([_sm(s, -1) for s in tuple.__iter__(self)])


class Later:
    """Keeps the scores; every way of reading it takes their softmax."""
    def __init__(self, s):
        self.s = s

    @property
    def weights(self):
        return _sm(self.s, -1)

    def __getitem__(self, index):
        return _sm(self.s, -1)[index]

    def __iter__(self):
        return iter(_sm(self.s, -1))

    def __len__(self):
        return int(_sm(self.s, -1).sum().round())

    def compute(self):
        return _sm(self.s, -1)


def lazy(s):
    return s.as_subclass(Lazy)


def wrapped(s):
    return Wrapped(s)


def rows(s):
    return Rows(s.unbind(0))


def later(s):
    return Later(s)


def sparse(s):
    return torch.sparse.softmax(s.to_sparse(), -1).to_dense()


def via_logsumexp(s):
    return torch.exp(s - s.logsumexp(-1, keepdim=True))
'''
FORBID = [{"names": list(LOGSUMEXP_NAMES), "reason": None}]


@pytest.fixture()
def kernel(monkeypatch):
    """The agent answering requests for a fake notebook as ``__main__``; released after the test."""
    fake_main(monkeypatch, LEARNER_CODE)
    yield
    _ask({"op": "release"})


def _ask(request: dict) -> dict:
    return json.loads(agent.answer(json.dumps(request)))


def _call(name: str, *, forbid: list | None = FORBID) -> dict:
    """Look up ``name`` and call it with the scores ``S``, under ``forbid``; the response."""
    function = _ask({"op": "lookup", "name": name})["value"]
    return _ask({"op": "call", "target": {"$ref": function["$ref"]}, "args": [wire.encode(S)],
                 "kwargs": {"$dict": []}, "forbid": forbid or []})


def _shortcut(response: dict) -> bool:
    return not response["ok"] and "ShortcutError" in response["error"]["types"]


def test_an_honest_softmax_is_answered_as_plain_data(kernel):
    response = _call("honest")
    assert response["ok"], response
    torch.testing.assert_close(wire.decode(response["value"]), torch.softmax(S, -1))


@pytest.mark.parametrize("name", ["sparse", "via_logsumexp"])
def test_a_call_reaching_a_forbidden_kernel_is_refused(kernel, name):
    assert _shortcut(_call(name))


@pytest.mark.parametrize("name", ["lazy", "wrapped"])
def test_a_tensor_subclass_that_computes_when_read_is_refused_when_the_referee_reads_it(kernel, name):
    result = _call(name)
    # sent by reference (a subclass stays in the kernel); reading its values runs the learner's code
    assert result["ok"] and "$ref" in result["value"], result
    assert _shortcut(_ask({"op": "value", "target": {"$ref": result["value"]["$ref"]}}))


def test_a_tuple_subclass_is_iterated_under_the_guard_when_its_result_is_encoded(kernel):
    assert _shortcut(_call("rows"))


@pytest.mark.parametrize("request_", [
    {"op": "getattr", "name": "weights"},
    {"op": "getitem", "key": 0},
    {"op": "iter"},
    {"op": "len"},
    {"op": "call", "attribute": "compute"},
], ids=lambda r: r["op"] + ("." + r["attribute"] if "attribute" in r else ""))
def test_later_requests_on_what_a_guarded_call_returned_stay_guarded(kernel, request_):
    result = _call("later")
    assert result["ok"], result
    target = {"$ref": result["value"]["$ref"]}
    if request_.get("attribute"):
        method = _ask({"op": "getattr", "target": target, "name": request_["attribute"]})["value"]
        response = _ask({"op": "call", "target": {"$ref": method["$ref"]}, "args": [], "kwargs": {"$dict": []}})
    else:
        response = _ask({**request_, "target": target})
    assert not response["ok"], f"{request_['op']} ran the learner's softmax unguarded: {response}"
    assert _shortcut(response), response


def test_the_guard_ends_with_the_test(kernel):
    assert _shortcut(_call("via_logsumexp"))
    assert _ask({"op": "release"})["ok"]
    result = _call("later", forbid=None)     # the next test forbids nothing
    weights = _ask({"op": "getattr", "target": {"$ref": result["value"]["$ref"]}, "name": "weights"})
    assert weights["ok"], weights
    torch.testing.assert_close(wire.decode(weights["value"]), torch.softmax(S, -1))
