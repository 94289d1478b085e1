"""course_runtime.testing: what notebook test cells rely on to judge a learner's work."""

import sys

import pytest
import torch

from course_runtime.testing import (ShortcutError, check_answer, check_close, check_shape, explain_errors,
                                      check_tensor, forbid_shortcuts, gradients, seeded, standing_in)


class RiggedTensor(torch.Tensor):
    """A tensor subclass whose comparisons always say "equal"."""

    def __eq__(self, other):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True


class LookAlike:
    """Not a tensor at all, but claims to equal everything."""

    shape = (2, 2)

    def __eq__(self, other):
        return True


def message_of(call) -> str:
    with pytest.raises(AssertionError) as caught:
        call()
    return str(caught.value)


# --- check_close --------------------------------------------------------------------------------


def test_check_close_accepts_a_match_within_tolerance():
    expected = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    check_close(expected + 1e-7, expected)
    check_close(expected.double(), expected)  # dtypes may differ; values are what count


def test_check_close_refuses_a_rigged_subclass():
    rigged = torch.zeros(2, 2).as_subclass(RiggedTensor)
    message = message_of(lambda: check_close(rigged, torch.ones(2, 2)))
    assert "subclass of torch.Tensor" in message


def test_check_close_refuses_parameters_and_look_alikes():
    assert "plain tensor" in message_of(lambda: check_close(torch.nn.Parameter(torch.ones(2)), torch.ones(2)))
    assert "should be a torch.Tensor" in message_of(lambda: check_close(LookAlike(), torch.ones(2, 2)))
    assert "forget the `return`" in message_of(lambda: check_close(None, torch.ones(2)))
    assert "tuple" in message_of(lambda: check_close((torch.ones(2), None), torch.ones(2)))


def test_check_close_names_both_shapes_and_the_hint():
    message = message_of(lambda: check_close(torch.ones(2, 3), torch.ones(3, 2), name="weights",
                                             hint="did you take the softmax over the last axis?"))
    assert "`weights`" in message and "(3, 2)" in message and "(2, 3)" in message
    assert "did you take the softmax over the last axis?" in message


def test_check_close_locates_nan():
    actual = torch.ones(2, 3)
    actual[1, 2] = float("nan")
    message = message_of(lambda: check_close(actual, torch.ones(2, 3), hint="fully masked row?"))
    assert "NaN" in message and "(1, 2)" in message and "fully masked row?" in message


def test_check_close_reports_the_largest_difference_and_where():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[0, 1], actual[1, 2] = 0.5, 2.0
    message = message_of(lambda: check_close(actual, expected, name="scores"))
    assert "2 of 6 entries" in message and "(1, 2)" in message
    assert "you returned 2, expected 0" in message


def test_check_close_handles_scalars_and_integer_results():
    assert "index ()" in message_of(lambda: check_close(torch.tensor(1.0), torch.tensor(2.0)))
    assert "floating-point" in message_of(lambda: check_close(torch.ones(2, dtype=torch.long), torch.ones(2)))


def test_check_close_matches_non_finite_references_exactly():
    expected = torch.tensor([1.0, float("-inf"), float("nan")])
    check_close(expected.clone(), expected)
    assert "index (1,)" in message_of(lambda: check_close(torch.tensor([1.0, 0.0, float("nan")]), expected))


def test_check_close_ignores_a_monkeypatched_torch(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch, "abs", lambda x: torch.zeros_like(x))
    monkeypatch.setattr(torch.Tensor, "__sub__", lambda self, other: torch.zeros_like(self))
    message_of(lambda: check_close(torch.zeros(3), torch.ones(3)))


# --- check_shape and check_tensor ---------------------------------------------------------------


def test_check_shape():
    check_shape(torch.zeros(2, 3, 4), (2, None, 4), name="scores")
    message = message_of(lambda: check_shape(torch.zeros(2, 3), (2, 3, 1), name="scores", hint="keepdim?"))
    assert "(2, 3, 1)" in message and "(2, 3)" in message and "keepdim?" in message
    assert "dimension 1 differs" in message_of(lambda: check_shape(torch.zeros(2, 3), (2, 4), name="x"))


def test_check_tensor():
    check_tensor(torch.zeros(2), name="mask", dtype=torch.float32, device="cpu")
    assert "torch.bool" in message_of(lambda: check_tensor(torch.zeros(2), name="mask", dtype=torch.bool))
    assert "cuda" in message_of(lambda: check_tensor(torch.zeros(2), name="x", device="cuda"))
    assert "should be a torch.Tensor" in message_of(lambda: check_tensor([1, 2], name="x"))


# --- forbid_shortcuts ---------------------------------------------------------------------------


SOFTMAXES = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax")


def test_guard_blocks_each_shortcut_with_a_clear_message():
    x = torch.randn(2, 3)
    with forbid_shortcuts(*SOFTMAXES, "torch.nn.functional.scaled_dot_product_attention",
                          "torch.nn.MultiheadAttention.forward"):
        for call in (lambda: torch.softmax(x, -1), lambda: torch.nn.functional.softmax(x, -1),
                     lambda: x.softmax(-1), lambda: torch.nn.Softmax(dim=-1)(x),
                     lambda: torch.nn.functional.scaled_dot_product_attention(x, x, x),
                     lambda: torch.nn.MultiheadAttention(3, 1)(x, x, x)):
            with pytest.raises(ShortcutError, match="implement this yourself"):
                call()
        torch.exp(x).sum(-1)  # the building blocks still work


def test_guard_restores_everything_even_after_an_exception():
    originals = (torch.softmax, torch.nn.functional.softmax, torch.nn.MultiheadAttention.forward)
    with pytest.raises(ZeroDivisionError):
        with forbid_shortcuts(*SOFTMAXES, "torch.nn.MultiheadAttention.forward"):
            1 / 0
    assert (torch.softmax, torch.nn.functional.softmax, torch.nn.MultiheadAttention.forward) == originals
    assert "softmax" not in vars(torch.Tensor), "an inherited method must be removed, not shadowed"
    torch.ones(2).softmax(-1)


def test_guard_blocks_aliases_in_the_notebook_namespace(monkeypatch):
    namespace = sys.modules["__main__"].__dict__
    monkeypatch.setitem(namespace, "my_softmax", torch.nn.functional.softmax)
    with forbid_shortcuts("torch.nn.functional.softmax", reason="use torch.exp"):
        with pytest.raises(ShortcutError, match="use torch.exp"):
            namespace["my_softmax"](torch.ones(2), -1)
    assert namespace["my_softmax"] is torch.nn.functional.softmax


def test_guard_blocks_default_argument_aliases_and_aten_calls():
    def hidden_alias(x, _softmax=torch.nn.functional.softmax):
        return _softmax(x, -1)

    def through_aten(x):
        return torch.ops.aten._softmax(x, -1, False)

    def by_hand(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    x = torch.randn(3, 4)
    with forbid_shortcuts("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"):
        for shortcut in (hidden_alias, through_aten, lambda t: torch.nn.Softmax(-1)(t)):
            with pytest.raises(ShortcutError, match="implement this yourself"):
                shortcut(x)
        result = by_hand(x)
    check_close(result, torch.softmax(x, -1))
    hidden_alias(x)  # everything works again after the block


def test_guard_works_as_a_decorator_and_rejects_typos():
    @forbid_shortcuts("torch.softmax")
    def learner():
        return torch.softmax(torch.ones(2), 0)

    with pytest.raises(ShortcutError):
        learner()
    with pytest.raises(ValueError, match="does not exist"):
        with forbid_shortcuts("torch.no_such_function"):
            pass


# --- check_answer -------------------------------------------------------------------------------


def test_check_answer_accepts_plain_values():
    check_answer("  B ", "b", name="answer_q1")
    check_answer(131072, 131072, name="answer_q2")
    check_answer(0.5, 0.5, name="answer_q3")
    check_answer(True, True, name="answer_q4")


def test_check_answer_refuses_wrong_values_and_look_alikes():
    class Always(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

        def strip(self):
            return self

        def lower(self):
            return self

    assert "plain str" in message_of(lambda: check_answer(Always("z"), "b", name="q"))
    assert "not correct" in message_of(lambda: check_answer("c", "b", name="q", hint="see section 2"))
    assert "not correct" in message_of(lambda: check_answer(True, 1, name="q"))
    assert "plain str" in message_of(lambda: check_answer(None, "b", name="q"))


def test_check_answer_reads_one_number_from_a_tensor_or_numpy_scalar():
    import numpy
    check_answer(torch.tensor([0.25]), 0.25, name="answer_q2")       # e.g. alibi_slopes(6)[4:5]
    check_answer(torch.tensor(3), 3, name="answer_q2")
    check_answer(numpy.float64(0.5), 0.5, name="answer_q2")
    message = message_of(lambda: check_answer(torch.ones(3), 1.0, name="answer_q2"))
    assert "tensor of shape (3,)" in message and "one number" in message
    assert "plain str" in message_of(lambda: check_answer(torch.tensor([1.0]), "b", name="q"))


def test_check_answer_names_a_known_mistake_and_accepts_a_tolerance():
    mistakes = {512: "count both K and V", 0.5: "bytes, not kilobytes"}
    assert "count both K and V" in message_of(lambda: check_answer(512, 1024, name="q", mistakes=mistakes,
                                                                   hint="generic"))
    assert "generic" in message_of(lambda: check_answer(7, 1024, name="q", mistakes=mistakes, hint="generic"))
    check_answer(1024.4, 1024, name="q", rel_tol=1e-3)
    with pytest.raises(ValueError, match="equals the right answer"):
        check_answer(1024, 1024, name="q", mistakes={1024: "oops"})


def test_check_close_gives_the_hint_of_the_mistake_it_matches():
    expected = torch.tensor([1.0, 2.0])
    mistakes = {"forgot to scale": expected * 2, "wrong sign": -expected}
    message = message_of(lambda: check_close(expected * 2, expected, name="out", hint="generic",
                                             mistakes=mistakes))
    assert "Hint: forgot to scale" in message and "generic" not in message
    assert "Hint: wrong sign" in message_of(lambda: check_close(-expected, expected, name="out", mistakes=mistakes))
    assert "Hint: generic" in message_of(lambda: check_close(expected + 7, expected, name="out", hint="generic",
                                                             mistakes=mistakes))
    check_close(expected, expected, name="out", mistakes=mistakes)          # a right answer passes
    # a mistake of the shape's kind is recognised too
    assert "Hint: flattened" in message_of(lambda: check_close(
        expected.reshape(2, 1), expected, name="out", mistakes={"flattened": expected.reshape(2, 1)}))


def test_check_close_refuses_a_mistake_table_whose_hints_cannot_fire():
    expected = torch.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="gives the right answer"):
        check_close(expected, expected, name="out", mistakes={"no-op": expected.clone()})
    with pytest.raises(ValueError, match="could never fire"):
        check_close(expected, expected, name="out", mistakes=[("a", expected * 2), ("b", expected * 2)])


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_explain_errors_adds_the_hint_to_an_error_of_the_learners_code():
    def scores(q, k):
        return q @ k.T

    q = torch.zeros(2, 3, 4)
    with pytest.raises(AssertionError) as caught:
        with explain_errors("use k.transpose(-2, -1): k.T reverses all axes", call="scores(q, k)"):
            scores(q, q)
    assert str(caught.value).startswith("scores(q, k) raised RuntimeError:")
    assert "Hint: use k.transpose(-2, -1)" in str(caught.value)
    with pytest.raises(ShortcutError):
        with explain_errors("hint"):
            raise ShortcutError("implement this yourself")
    with pytest.raises(KeyError):
        with explain_errors("hint"):
            raise KeyError("not explained")
    with pytest.raises(NotImplementedError):
        with explain_errors("hint"):
            raise NotImplementedError("replace this line with your code")


def test_a_kernel_reached_through_pytorch_names_pytorch_not_the_library():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ShortcutError) as caught:
        with forbid_shortcuts("transformer_core.attention.scaled_dot_product_attention"):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
    message = str(caught.value)
    assert "`torch.nn.functional.scaled_dot_product_attention`" in message
    assert "computes what `transformer_core.attention.scaled_dot_product_attention` computes" in message


def test_seeded_repeats_and_restores():
    before = torch.get_rng_state()
    with seeded(3):
        first = torch.randn(4)
    with seeded(3):
        second = torch.randn(4)
    assert torch.equal(first, second)
    assert torch.equal(torch.get_rng_state(), before)


def test_standing_in_swaps_notebook_names_for_a_block(monkeypatch):
    main = sys.modules["__main__"].__dict__
    monkeypatch.setitem(main, "scores", lambda q: "learner")
    with standing_in(scores=lambda q: "reference", extra=len):
        assert main["scores"](0) == "reference" and main["extra"] is len
    assert main["scores"](0) == "learner" and "extra" not in main


def test_gradients_backpropagates_through_a_module():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    out, (grad_x,), params = gradients(layer, x, module=layer)
    assert torch.allclose(out, layer(x).detach())
    assert torch.allclose(grad_x, layer.weight.sum(0).expand(4, 3))
    assert torch.allclose(params["weight"], x.sum(0).expand(2, 3)) and x.grad is None
    with pytest.raises(AssertionError, match="does not depend on the inputs"):
        gradients(lambda t: t.detach() * 2, x)
