"""The grading kernel's getattr/setattr/delattr/hasattr (course_runtime/checked_builtins.py): attribute names
computed at run time reach what honest code reaches, and never internals, private parts of the library,
forbidden modules or a library's classes and modules to change."""

import pytest
import torch

from course_runtime.checked_builtins import (RefusedAttribute, checked_delattr, checked_getattr, checked_hasattr,
                                             checked_setattr)

LEARNER = '''
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        for name in ("q", "k", "v"):
            setattr(self, f"{name}_proj", nn.Linear(d, d))
        setattr(self, "_cache", None)

    def forward(self, x):
        return sum(getattr(self, f"{n}_proj")(x) for n in "qkv")
'''


@pytest.fixture()
def learner_namespace():
    """A notebook's namespace in a grading kernel: its classes belong to ``__main__``."""
    namespace = {"__name__": "__main__", "getattr": checked_getattr, "setattr": checked_setattr}
    exec(compile(LEARNER, "<learner>", "exec"), namespace)
    return namespace


def test_honest_loops_over_computed_names_work(learner_namespace):
    layer = learner_namespace["Attention"](4)
    assert set(dict(layer.named_children())) == {"q_proj", "k_proj", "v_proj"}
    assert layer(torch.zeros(2, 4)).shape == (2, 4)
    assert checked_getattr(layer, "_cache") is None                      # the learner's own private name
    assert checked_getattr(layer, "missing", 7) == 7
    assert checked_hasattr(layer, "q_proj") and not checked_hasattr(layer, "missing")
    assert checked_getattr(torch, "soft" + "max") is torch.softmax       # the guard, not this, judges built-ins
    checked_delattr(layer, "_cache")


@pytest.mark.parametrize("obj, name", [
    (torch, "sys"), (torch, "os"), (torch, "_C"), (torch.nn, "_reduction"),
    (torch.zeros(1), "_version"), (torch.zeros(1), "__dict__"),
    (torch.ops, "aten"), (print, "__self__"), (lambda: 0, "__globals__"),
])
def test_reading_internals_private_parts_and_forbidden_modules_is_refused(obj, name):
    with pytest.raises(RefusedAttribute):
        checked_getattr(obj, name)
    with pytest.raises(RefusedAttribute):
        checked_getattr(obj, name, None)                                  # a default does not hide the refusal
    with pytest.raises(RefusedAttribute):
        checked_hasattr(obj, name)


@pytest.mark.parametrize("obj, name", [(torch, "softmax"), (torch.nn.Linear, "forward"), (torch.Tensor, "softmax")])
def test_changing_a_library_module_or_class_is_refused(obj, name):
    with pytest.raises(RefusedAttribute, match="library everyone's code relies on"):
        checked_setattr(obj, name, print)
    with pytest.raises(RefusedAttribute):
        checked_delattr(obj, name)
    assert getattr(obj, name) is not print


def test_a_learner_class_may_be_changed_but_not_its_dunders(learner_namespace):
    cls = learner_namespace["Attention"]
    checked_setattr(cls, "extra", 1)
    with pytest.raises(RefusedAttribute):
        checked_setattr(cls, "__getattr__", print)
