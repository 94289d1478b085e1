"""Fewer round trips between the referee and the learner's kernel, with exactly the same answers.

A reference from the agent carries what can be read of the object without running learner code (a
parameter's values; a module's parameters, buffers and submodules); the referee uses it only until
its next request. These run the agent in this process with a fake notebook as ``__main__``, as
``tests/test_referee.py`` does, and count the requests.
"""


import pytest
from conftest import fake_main
import torch

from course_runtime import agent, remote, wire

LEARNER_CODE = '''
import torch
import torch.nn as nn

class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.register_buffer("mask", torch.ones(3, 3).tril())

    def forward(self, x):
        return self.q_proj(x) @ self.k_proj(x).transpose(-2, -1)

    def bump(self):
        with torch.no_grad():
            self.q_proj.weight.add_(1.0)

reads = []

class Sneaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)

    @property
    def proj(self):               # a property: reading it runs learner code, every time
        reads.append("proj")
        return self.inner

class Dynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)

    def __getattr__(self, name):  # a module that changes attribute lookup gets nothing prefetched
        reads.append(name)
        return super().__getattr__(name)

layer = SelfAttention(4, 2)
sneaky = Sneaky()
dynamic = Dynamic()
'''


@pytest.fixture()
def session(monkeypatch):
    """A session whose transport is the agent in this process, counting requests."""
    main = fake_main(monkeypatch, LEARNER_CODE)
    sent: list[str] = []

    def transport(request: str) -> str:
        sent.append(request)
        return agent.answer(request)

    yield remote.Session(transport), main, sent
    agent.answer(wire.RELEASE_REQUEST)


def test_a_modules_parts_and_parameter_values_come_with_its_reference(session):
    kernel, main, sent = session
    layer = kernel.lookup("layer")
    assert len(sent) == 1
    weights = [getattr(layer, name).weight.detach() for name in ("q_proj", "k_proj")]
    assert isinstance(layer.q_proj, torch.nn.Linear) and layer.q_proj.bias is None
    assert layer.q_proj.weight.shape == (2, 4) and layer.q_proj.weight.numel() == 8
    assert torch.equal(layer.mask, torch.ones(3, 3).tril())
    assert len(sent) == 1, "every read above was answered by the lookup's reference"
    assert torch.equal(weights[0], main.layer.q_proj.weight.detach())
    assert torch.equal(weights[1], main.layer.k_proj.weight.detach())
    weights[0].add_(5)  # each read is a new copy, as a request would give
    assert torch.equal(layer.q_proj.weight.detach(), main.layer.q_proj.weight.detach())


def test_after_any_request_the_kernel_is_asked_again_and_its_answer_kept(session):
    kernel, main, sent = session
    layer = kernel.lookup("layer")
    before = layer.q_proj.weight.detach()
    layer.bump()                   # learner code ran: what the lookup said is out of date
    count = len(sent)
    after = layer.q_proj.weight.detach()
    assert torch.equal(after, before + 1) and torch.equal(after, main.layer.q_proj.weight.detach())
    assert len(sent) == count + 1, "one getattr, which also brings the module's parts up to date"
    assert torch.equal(layer.k_proj.weight.detach(), main.layer.k_proj.weight.detach())
    assert len(sent) == count + 1
    parameters = list(layer.parameters())
    assert [p.numel() for p in parameters] == [p.numel() for p in main.layer.parameters()]
    assert len(sent) == count + 4, "getattr, call and iter; the sizes came with the parameters"
    with pytest.raises(TypeError):
        len(layer.parameters())


def test_attributes_whose_reading_runs_learner_code_are_always_asked_for(session):
    kernel, main, sent = session
    sneaky, dynamic = kernel.lookup("sneaky"), kernel.lookup("dynamic")
    for _ in range(2):
        assert isinstance(sneaky.proj, torch.nn.Linear)
        assert isinstance(dynamic.inner, torch.nn.Linear)
    assert main.reads == ["proj", "inner", "proj", "inner"], "the property and __getattr__ ran on every read"
    assert len(sent) == 2 + 4


def test_a_malformed_description_from_the_kernel_is_refused(session):
    kernel, _, _ = session
    bad = {"$ref": 1, "types": ["torch.nn.modules.module.Module"], "known": {"attributes": ["not", "a", "dict"]}}
    with pytest.raises(wire.WireError):
        wire.decode(bad, resolve=kernel._proxy)
    with pytest.raises(wire.WireError):
        wire.decode({"$tensor": {}, "known": {}}, resolve=kernel._proxy)
    with pytest.raises(wire.WireError):
        wire.decode({"$ref": 1, "types": [], "known": {"data": {"$ref": 2}}}, resolve=kernel._proxy)._value()


def test_a_large_model_sends_its_values_only_up_to_the_budget(session, monkeypatch):
    kernel, main, sent = session
    main.big = torch.nn.Sequential(*(torch.nn.Linear(256, 256) for _ in range(8)))  # 2 MiB of weights
    monkeypatch.setattr(agent, "KNOWN_BYTES", 300 * 1024)
    response = agent.answer(wire.request_text(wire.Op.LOOKUP, name="big"))
    assert len(response) < 600 * 1024, "at most the budget of tensor data (as base64) travels unasked"
    big = kernel.lookup("big")
    first = getattr(big, "0")
    assert torch.equal(first.weight.detach(), main.big[0].weight.detach())
