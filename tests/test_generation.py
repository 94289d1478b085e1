"""Decoding: sampling filters against hand-computed examples and their defining properties,
cached vs uncached generation, and beam search against greedy decoding and exhaustive search."""

import itertools
import math

import pytest
import torch
from torch import nn

from transformer_core.generation import (beam_search, generate, sample_next_token, temperature_scale,
                                         top_k_filter, top_p_filter)
from transformer_core.models import DecoderOnlyLM, TransformerConfig


def _probs(logits):
    return torch.softmax(logits.double(), dim=-1)


def _peaked(model):
    """Re-draw every weight with std 0.3, large enough that the next-token distributions are
    peaked (no near-ties between the best tokens, so float rounding cannot flip an arg-max)."""
    with torch.no_grad():
        for parameter in model.parameters():
            nn.init.normal_(parameter, std=0.3)
    return model


def _tiny_lm(position="learned", *, vocab_size=13, max_len=16, seed=0):
    """A tiny random GPT with peaked next-token distributions."""
    torch.manual_seed(seed)
    config = TransformerConfig(vocab_size=vocab_size, d_model=32, n_heads=4, n_layers=2,
                               max_len=max_len, position=position, dropout=0.1)
    return _peaked(DecoderOnlyLM(config))


# ------------------------------------------------------------------------------ temperature

def test_temperature_divides_the_logits():
    logits = torch.tensor([[2.0, -1.0, 0.5]])
    assert torch.equal(temperature_scale(logits, 0.5), logits * 2)
    assert torch.equal(temperature_scale(logits, 1.0), logits)
    # T -> 0 approaches the one-hot arg-max, large T approaches uniform.
    assert _probs(temperature_scale(logits, 0.01))[0, 0] > 0.999
    uniform = torch.full((1, 3), 1 / 3, dtype=torch.float64)
    assert torch.allclose(_probs(temperature_scale(logits, 1e4)), uniform, atol=1e-3)


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, float("nan"), float("inf"), True, "1"])
def test_temperature_rejects_non_positive_or_non_finite(bad):
    with pytest.raises(ValueError, match="temperature"):
        temperature_scale(torch.zeros(1, 3), bad)


# ------------------------------------------------------------------------------ top-k

def test_top_k_hand_example_kept_set_and_renormalised_probabilities():
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], dtype=torch.float64)
    filtered = top_k_filter(probs.log(), 2)
    assert torch.equal(torch.isfinite(filtered), torch.tensor([[False, False, True, True],
                                                              [True, True, False, False]]))
    expected = torch.tensor([[0, 0, 3 / 7, 4 / 7], [4 / 7, 3 / 7, 0, 0]], dtype=torch.float64)
    torch.testing.assert_close(_probs(filtered), expected, rtol=0, atol=1e-12)


def test_top_k_ties_keep_the_lower_token_index():
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0], [2.0, 2.0, 2.0, 1.0]])
    filtered = top_k_filter(logits, 2)
    assert torch.isfinite(filtered).tolist() == [[False, True, True, False], [True, True, False, False]]
    assert torch.isfinite(top_k_filter(torch.tensor([5.0, 5.0, 5.0]), 1)).tolist() == [True, False, False]


def test_top_k_with_k_at_least_vocab_keeps_everything_and_k_one_is_argmax():
    logits = torch.randn(3, 7)
    assert torch.equal(top_k_filter(logits, 7), logits)
    assert torch.equal(top_k_filter(logits, 100), logits)
    kept = torch.isfinite(top_k_filter(logits, 1))
    assert torch.equal(kept.nonzero()[:, 1], logits.argmax(-1))


@pytest.mark.parametrize("bad", [0, -2, 1.5, None, True])
def test_top_k_rejects_bad_k(bad):
    with pytest.raises(ValueError, match="k must be an integer"):
        top_k_filter(torch.zeros(1, 4), bad)


# ------------------------------------------------------------------------------ top-p

# Dyadic probabilities are exact in float64, so the boundary cases are decided exactly.
_NUCLEUS_PROBS = [0.125, 0.5, 0.25, 0.125]


@pytest.mark.parametrize("p, expected", [
    (0.3, [0, 1, 0, 0]),                       # the top token alone already has mass >= p
    (0.5, [0, 1, 0, 0]),                       # mass exactly p: stop there
    (0.6, [0, 2 / 3, 1 / 3, 0]),
    (0.75, [0, 2 / 3, 1 / 3, 0]),              # 0.5 + 0.25 is exactly p: two tokens
    (0.76, [1 / 7, 4 / 7, 2 / 7, 0]),          # tie between the two 0.125s: lower index kept
    (1.0, [0.125, 0.5, 0.25, 0.125]),
])
def test_top_p_hand_examples_and_boundary(p, expected):
    logits = torch.tensor([_NUCLEUS_PROBS], dtype=torch.float64).log()
    expected = torch.tensor([expected], dtype=torch.float64)
    torch.testing.assert_close(_probs(top_p_filter(logits, p)), expected, rtol=0, atol=1e-12)


def test_top_p_docstring_example_in_float32():
    filtered = top_p_filter(torch.tensor([0.1, 0.6, 0.3]).log(), 0.8)
    assert torch.isfinite(filtered).tolist() == [False, True, True]
    torch.testing.assert_close(filtered.softmax(-1), torch.tensor([0.0, 2 / 3, 1 / 3]))


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.99])
def test_top_p_property_on_random_logits(p):
    """The kept set is a top-probability prefix, holds mass >= p, and without its least probable
    member holds mass < p."""
    generator = torch.Generator().manual_seed(int(p * 1000))
    logits = torch.randn(200, 12, generator=generator) * 2
    kept = torch.isfinite(top_p_filter(logits, p))
    probs = _probs(logits)
    for row_probs, row_kept in zip(probs, kept):
        inside, outside = row_probs[row_kept], row_probs[~row_kept]
        assert len(inside) >= 1
        if len(outside):
            assert inside.min() >= outside.max(), "the kept tokens must be the most probable ones"
        assert inside.sum() >= p
        assert inside.sum() - inside.min() < p, "the nucleus must be the smallest such set"
    kept_probs = _probs(top_p_filter(logits, p))
    renormalised = torch.where(kept, probs, 0.0) / (probs * kept).sum(-1, keepdim=True)
    torch.testing.assert_close(kept_probs, renormalised)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, None])
def test_top_p_rejects_bad_p(bad):
    with pytest.raises(ValueError, match="p must be a number"):
        top_p_filter(torch.zeros(1, 4), bad)


def test_filters_leave_their_input_untouched_and_accept_extra_batch_dims():
    logits = torch.randn(2, 3, 9)
    before = logits.clone()
    for filtered in (top_k_filter(logits, 3), top_p_filter(logits, 0.7), temperature_scale(logits, 2.0)):
        assert filtered.shape == logits.shape
    assert torch.equal(logits, before)
    assert (torch.isfinite(top_k_filter(logits, 3)).sum(-1) == 3).all()


# ------------------------------------------------------------------------------ sample_next_token

def test_greedy_takes_the_argmax_with_ties_to_the_lower_index():
    logits = torch.tensor([[0.1, 2.0, 2.0], [5.0, -1.0, 5.0]])
    assert sample_next_token(logits).tolist() == [1, 0]
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, temperature=0.0)  # checked in greedy mode too


def test_sampling_is_reproducible_with_a_seeded_generator():
    logits = torch.randn(4, 50)
    draws = [sample_next_token(logits, do_sample=True, temperature=0.9, top_k=20, top_p=0.9,
                               generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(draws[0], draws[1])
    assert draws[0].shape == (4,) and draws[0].dtype == torch.long


def test_sampling_follows_the_filtered_distribution():
    logits = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64).log().float().expand(20000, 4)
    draws = sample_next_token(logits, do_sample=True, top_k=2, generator=torch.Generator().manual_seed(0))
    assert set(draws.unique().tolist()) == {2, 3}, "top-k=2 must only ever draw the two best tokens"
    assert abs((draws == 3).double().mean().item() - 4 / 7) < 0.015
    nucleus = sample_next_token(logits, do_sample=True, top_p=0.35,
                                generator=torch.Generator().manual_seed(0))
    assert set(nucleus.unique().tolist()) == {3}


def test_sample_next_token_explains_a_3d_input():
    with pytest.raises(ValueError, match=r"logits\[:, -1, :\]"):
        sample_next_token(torch.zeros(2, 3, 5))


# ------------------------------------------------------------------------------ generate

@pytest.mark.parametrize("position, batch_size",
                         [("learned", 1), ("learned", 2), ("rope", 2), ("alibi", 2)])
def test_greedy_generation_is_identical_with_and_without_cache(position, batch_size):
    model = _tiny_lm(position)
    prompt = torch.randint(0, 13, (batch_size, 4), generator=torch.Generator().manual_seed(1))
    # 8 new tokens fit in max_len=16; 20 go past it (the cache then falls back to cropping).
    for n_new in (8, 20):
        cached = generate(model, prompt, n_new, use_cache=True)
        uncached = generate(model, prompt, n_new, use_cache=False)
        assert cached.shape == (batch_size, 4 + n_new)
        assert torch.equal(cached[:, :4], prompt)
        assert torch.equal(cached, uncached), f"cached and uncached greedy tokens differ ({position})"


def test_generate_matches_a_hand_written_greedy_loop():
    model = _tiny_lm().eval()
    tokens = torch.tensor([[3, 1, 4]])
    expected = tokens
    with torch.no_grad():
        for _ in range(5):
            logits, _ = model(expected)
            expected = torch.cat([expected, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generate(model, tokens, 5), expected)


def test_prompt_longer_than_max_len_is_cropped():
    model = _tiny_lm(max_len=8)
    prompt = torch.randint(0, 13, (1, 12), generator=torch.Generator().manual_seed(2))
    out = generate(model, prompt, 3)
    assert torch.equal(out, generate(model, prompt, 3, use_cache=False))
    assert torch.equal(generate(model, prompt[:, -8:], 1)[:, -1], out[:, 12])


def test_sampled_generation_is_reproducible_and_cache_independent():
    model = _tiny_lm("rope")
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    kwargs = dict(do_sample=True, temperature=0.8, top_k=6, top_p=0.9)
    runs = [generate(model, prompt, 10, use_cache=use_cache,
                     generator=torch.Generator().manual_seed(3), **kwargs)
            for use_cache in (True, True, False)]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])


def test_generate_restores_the_training_mode():
    model = _tiny_lm().train()
    generate(model, torch.tensor([[1, 2]]), 2)
    assert model.training
    model.eval()
    generate(model, torch.tensor([[1, 2]]), 2)
    assert not model.training


def test_eos_pads_finished_sequences_and_stops_early():
    model = _tiny_lm()
    prompt = torch.tensor([[1, 2, 3], [7, 8, 9]])
    free = generate(model, prompt, 6)
    eos = free[0, 4].item()  # the second token the first sequence generates
    out = generate(model, prompt, 6, eos_token_id=eos)
    first_eos = (out[0, 3:] == eos).nonzero()[0].item() + 3
    assert (out[0, first_eos:] == eos).all(), "after EOS a finished sequence is padded with EOS"
    assert torch.equal(out[:, :first_eos + 1][0], free[0, :first_eos + 1])
    both_done = generate(model, prompt[:1], 6, eos_token_id=eos)
    assert both_done.shape[1] == first_eos + 1, "generation stops once every sequence has produced EOS"


def test_generate_rejects_bad_inputs():
    model = _tiny_lm()
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        generate(model, torch.tensor([1, 2, 3]), 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, torch.tensor([[1]]), -1)
    assert torch.equal(generate(model, torch.tensor([[1, 2]]), 0), torch.tensor([[1, 2]]))


# ------------------------------------------------------------------------------ beam search

def _sequence_log_probs(model, prompt, continuations):
    """Sum of log p(continuation | prompt) for equal-length continuations, from one forward pass.

    Shapes: prompt (T,), continuations (N, n) -> (N,) float64.
    """
    continuations = torch.as_tensor(continuations).reshape(len(continuations), -1)
    full = torch.cat([prompt.expand(len(continuations), -1), continuations], dim=1)
    with torch.no_grad():
        logits, _ = model.eval()(full)
    n_prompt = len(prompt)
    log_probs = torch.log_softmax(logits[:, n_prompt - 1:-1].double(), dim=-1)   # (N, n, V)
    return log_probs.gather(-1, continuations[..., None]).squeeze(-1).sum(-1)


def _sequence_log_prob(model, prompt, continuation):
    return _sequence_log_probs(model, prompt, [continuation])[0].item()


def test_beam_size_one_is_greedy():
    model = _tiny_lm()
    prompt = torch.tensor([[2, 5, 7]])
    (best,) = beam_search(model, prompt, beam_size=1, max_new_tokens=6)
    assert torch.equal(best.tokens, generate(model, prompt, 6)[0])
    expected = _sequence_log_prob(model, prompt[0], best.tokens[3:].tolist())
    assert best.log_prob == pytest.approx(expected, abs=1e-6)


def test_beam_search_beats_or_ties_greedy_on_tiny_models():
    # Not a theorem (a beam may prune the greedy path), but the exhaustive test below is; here we
    # check the usual behaviour on a few fixed tiny models.
    for seed in range(3):
        model = _tiny_lm(seed=seed)
        prompt = torch.tensor([[seed, 4, 9]])
        greedy = generate(model, prompt, 5)[0, 3:].tolist()
        best = beam_search(model, prompt, beam_size=4, max_new_tokens=5, length_penalty=0.0)[0]
        assert best.score >= _sequence_log_prob(model, prompt[0], greedy) - 1e-5


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_wide_beam_equals_exhaustive_search(length_penalty):
    """With a beam as wide as the number of candidates, beam search must find the exact ranking."""
    vocab_size, n_new, eos = 4, 3, 3
    model = _tiny_lm(vocab_size=vocab_size, seed=5)
    prompt = torch.tensor([1, 0, 2])
    scored = []
    for length in range(1, n_new + 1):
        sequences = [list(seq) for seq in itertools.product(range(vocab_size), repeat=length)
                     if eos not in seq[:-1] and (length == n_new or seq[-1] == eos)]
        # EOS only at the end; shorter sequences must end with it.
        log_probs = _sequence_log_probs(model, prompt, sequences)
        scored += [(lp / length ** length_penalty, seq) for lp, seq in zip(log_probs.tolist(), sequences)]
    scored.sort(key=lambda item: item[0], reverse=True)
    beam = vocab_size ** n_new
    hyps = beam_search(model, prompt, beam_size=beam, max_new_tokens=n_new,
                       length_penalty=length_penalty, eos_token_id=eos)
    assert len(hyps) == len(scored)
    for hyp, (score, seq) in zip(hyps[:10], scored[:10]):
        assert hyp.tokens[3:].tolist() == seq
        assert hyp.score == pytest.approx(score, abs=1e-6)


def test_narrow_beam_finds_the_best_sequence_of_a_small_vocabulary():
    vocab_size, n_new = 5, 3
    model = _tiny_lm(vocab_size=vocab_size, seed=6)
    prompt = torch.tensor([4, 4])
    sequences = list(itertools.product(range(vocab_size), repeat=n_new))
    best = sequences[_sequence_log_probs(model, prompt, sequences).argmax().item()]
    hyps = beam_search(model, prompt, beam_size=vocab_size ** (n_new - 1), max_new_tokens=n_new)
    assert hyps[0].tokens[2:].tolist() == list(best)
    assert all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))
    assert math.isclose(hyps[0].score, hyps[0].log_prob / n_new)


def test_beam_search_rejects_batches_and_restores_mode():
    model = _tiny_lm().train()
    with pytest.raises(ValueError, match="batch size 1"):
        beam_search(model, torch.zeros(2, 3, dtype=torch.long), beam_size=2, max_new_tokens=2)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, torch.zeros(1, 3, dtype=torch.long), beam_size=0, max_new_tokens=2)
    beam_search(model, torch.zeros(1, 3, dtype=torch.long), beam_size=2, max_new_tokens=2)
    assert model.training


# ------------------------------------------------------------------------------ encoder-decoder

def _tiny_seq2seq(seed=0):
    from transformer_core.models import EncoderDecoderModel
    torch.manual_seed(seed)
    config = TransformerConfig(vocab_size=11, src_vocab_size=9, d_model=32, n_heads=4, n_layers=2,
                               max_len=12, dropout=0.1)
    return _peaked(EncoderDecoderModel(config))


def test_seq2seq_generation_matches_a_full_forward_loop_with_and_without_cache():
    model = _tiny_seq2seq()
    src = torch.randint(0, 9, (3, 7), generator=torch.Generator().manual_seed(1))
    src_mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    start = torch.zeros(3, 1, dtype=torch.long)
    model.eval()
    tokens = start
    with torch.no_grad():
        for _ in range(15):                         # past max_len = 12: the sliding window too
            logits, _ = model(src, tokens[:, -12:], src_mask=src_mask)
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    model.train()
    for use_cache in (True, False):
        out = generate(model, start, 15, src=src, src_mask=src_mask, use_cache=use_cache)
        assert torch.equal(out, tokens), f"use_cache={use_cache}"
    assert model.training


def test_seq2seq_beam_of_one_is_greedy_and_the_source_is_encoded_once():
    model = _tiny_seq2seq(seed=2)
    src = torch.tensor([[3, 1, 4, 1, 5]])
    start = torch.zeros(1, 1, dtype=torch.long)
    encoded = []
    hook = model.transformer.encoder_layers[0].register_forward_hook(lambda *args: encoded.append(1))
    greedy = generate(model, start, 6, src=src)
    assert len(encoded) == 1
    (best,) = beam_search(model, start, beam_size=1, max_new_tokens=6, src=src)
    hook.remove()
    assert torch.equal(best.tokens, greedy[0]) and len(encoded) == 2


def test_seq2seq_generation_explains_a_missing_or_misplaced_source():
    model, lm = _tiny_seq2seq(), _tiny_lm()
    start = torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="encoder-decoder model: pass the source ids as src"):
        generate(model, start, 3)
    with pytest.raises(ValueError, match="decoder-only: put the whole context into idx"):
        generate(lm, start, 3, src=torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="src has 1 rows but idx has 2"):
        generate(model, start, 3, src=torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="src must hold one source"):
        beam_search(model, start[:1], beam_size=2, max_new_tokens=3, src=torch.ones(2, 4, dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sampling_half_precision_logits_at_a_low_temperature(dtype):
    """logits / 1e-3 overflows float16; sampling must scale in float32 and draw like float32 does."""
    logits = torch.tensor([[70.0, 69.0, -5.0]])
    for top_p in (None, 0.9):
        drawn = [sample_next_token(logits.to(dtype), do_sample=True, temperature=1e-3, top_p=top_p,
                                   generator=torch.Generator().manual_seed(seed)) for seed in range(5)]
        assert all(token.item() == 0 for token in drawn)


def test_bad_inputs_to_generate_get_errors_that_name_them():
    from transformer_core.models import EncoderOnlyModel

    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).eval()
    with pytest.raises(ValueError, match="token id 11 is outside the vocabulary of 11 ids"):
        generate(model, torch.tensor([[3, 11]]), 2)
    with pytest.raises(ValueError, match="token id -1 is outside"):
        generate(model, torch.tensor([[-1, 3]]), 2)
    with pytest.raises(ValueError, match="token id 12 is outside"):
        model(torch.tensor([[12]]))                                   # the model itself, on a CPU
    with pytest.raises(ValueError, match="eos_token_id=11 is not a token id"):
        generate(model, torch.tensor([[3, 4]]), 2, eos_token_id=11)
    with pytest.raises(TypeError, match="EncoderOnlyModel is an encoder"):
        generate(EncoderOnlyModel(config), torch.tensor([[3, 4]]), 2)


def test_int32_prompts_generate_like_int64_prompts():
    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).eval()
    prompt = torch.tensor([[3, 4, 5]])
    expected = generate(model, prompt, 4)
    got = generate(model, prompt.int(), 4)
    assert got.dtype == torch.long and torch.equal(got, expected)


def test_a_cache_in_another_dtype_is_read_back_in_the_models_dtype():
    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=2, max_len=8)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).eval()
    idx = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        expected = model(idx)[0]
        cache = model.new_cache(1, 8, dtype=torch.float16)
        got = torch.cat([model(idx[:, :3], cache=cache)[0], model(idx[:, 3:], cache=cache)[0]], dim=1)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=2e-3, rtol=2e-3)       # float16 keys and values


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "t5"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_left_padded_prompts_generate_as_if_each_were_alone(position, use_cache):
    config = TransformerConfig(vocab_size=23, d_model=32, n_heads=4, n_layers=2, max_len=24, dropout=0.0,
                               position=position)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).double().eval()        # float64: no near-ties flip between batch and alone
    prompts = [torch.tensor([5, 9, 2]), torch.tensor([7, 1, 4, 4, 8, 3]), torch.tensor([6])]
    width = max(len(p) for p in prompts)
    pad = 0
    idx = torch.stack([torch.cat([torch.full((width - len(p),), pad), p]) for p in prompts])
    attention_mask = torch.stack([torch.cat([torch.zeros(width - len(p)), torch.ones(len(p))]) for p in prompts])
    batched = generate(model, idx, 7, use_cache=use_cache, attention_mask=attention_mask)
    for row, prompt in enumerate(prompts):
        alone = generate(model, prompt[None], 7, use_cache=use_cache)
        assert torch.equal(batched[row, width:], alone[0, len(prompt):]), (position, row)


def test_an_attention_mask_with_padding_inside_a_row_is_refused():
    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8)
    model = DecoderOnlyLM(config).eval()
    with pytest.raises(ValueError, match="left padding"):
        model(torch.tensor([[3, 4, 5]]), attention_mask=torch.tensor([[1, 0, 1]]))
    with pytest.raises(ValueError, match=r"attention_mask must have the prompt's shape \(1, 3\)"):
        generate(model, torch.tensor([[3, 4, 5]]), 2, attention_mask=torch.ones(1, 4))


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "none"])
def test_a_static_cache_gives_the_logits_of_the_whole_sequence(position):
    from transformer_core.cache import StaticKVCache

    config = TransformerConfig(vocab_size=23, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_len=16,
                               position=position)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).eval()
    idx = torch.randint(0, 23, (2, 9))
    with torch.no_grad():
        expected = model(idx)[0]
        cache = StaticKVCache(2, 2, 12, config.n_kv_heads, config.head_dim)
        chunks = [model(idx[:, :4], cache=cache)[0]] + [model(idx[:, t:t + 1], cache=cache)[0] for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), expected, atol=1e-5, rtol=1e-5)
    assert cache.length == 9 and cache.keys.shape[3] == 12      # every step saw all 12 slots


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_compiled_decoding_gives_eager_tokens_and_compiles_once_for_every_length(position):
    """The static cache spans max_len whatever the prompt and max_new_tokens, so every length reuses
    the one graph (a cache sized to each call recompiled for every new length, and the ninth raised
    FailOnRecompileLimitHit)."""
    from torch._dynamo.utils import counters

    config = TransformerConfig(vocab_size=23, d_model=32, n_heads=4, n_layers=2, max_len=24, position=position)
    torch.manual_seed(0)
    model = DecoderOnlyLM(config).eval()
    counters.clear()
    lengths = [(5, 10), (5, 10), (1, 4), (2, 9), (7, 3), (3, 15), (9, 12), (11, 6), (4, 20), (6, 2), (13, 1)]
    for prompt_len, n_new in lengths:           # aot_eager: dynamo's capture and functionalization, no codegen
        prompt = torch.randint(0, 23, (2, prompt_len), generator=torch.Generator().manual_seed(prompt_len))
        assert torch.equal(generate(model, prompt, n_new, compile="aot_eager"), generate(model, prompt, n_new))
    assert counters["stats"]["unique_graphs"] == 1, "one graph for every step of every call"
    prompt = torch.randint(0, 23, (2, 5), generator=torch.Generator().manual_seed(0))
    sampled = [generate(model, prompt, 6, do_sample=True, top_k=5, compile=flag,
                        generator=torch.Generator().manual_seed(3)) for flag in ("aot_eager", False)]
    assert torch.equal(*sampled)


def test_each_model_has_its_own_compilation_budget():
    """Dynamo counts recompilations per code object; models of different shapes must not share one
    limit (with a shared decode function, the ninth model in a process failed for good)."""
    with torch._dynamo.config.patch(recompile_limit=1):
        for d_model in (16, 32, 48):
            config = TransformerConfig(vocab_size=11, d_model=d_model, n_heads=4, n_layers=1, max_len=12)
            model = DecoderOnlyLM(config).eval()
            for prompt_len, n_new in ((3, 5), (4, 8)):
                prompt = torch.randint(0, 11, (1, prompt_len))
                assert torch.equal(generate(model, prompt, n_new, compile="aot_eager"),
                                   generate(model, prompt, n_new))


def test_compiled_decoding_past_max_len_warns_and_slides_like_eager():
    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8)
    torch.manual_seed(0)
    model = _peaked(DecoderOnlyLM(config)).eval()
    prompt = torch.tensor([[1, 2, 3]])
    with pytest.warns(UserWarning, match=r"do not fit in max_len=8.*ask for at most 6 new tokens"):
        out = generate(model, prompt, 20, compile="aot_eager")
    assert torch.equal(out, generate(model, prompt, 20))
    with pytest.warns(UserWarning, match="shorten the prompt to at most 8 tokens"):
        out = generate(model, torch.arange(10)[None], 3, compile="aot_eager")
    assert torch.equal(out, generate(model, torch.arange(10)[None], 3))


def test_compiled_decoding_refuses_what_it_cannot_do():
    config = TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8, position="alibi")
    model = DecoderOnlyLM(config).eval()
    with pytest.raises(ValueError, match="biases attention by distance"):
        generate(model, torch.tensor([[1, 2]]), 3, compile="eager")
    model = DecoderOnlyLM(TransformerConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=1, max_len=8)).eval()
    with pytest.raises(ValueError, match="no attention_mask"):
        generate(model, torch.tensor([[1, 2]]), 3, compile="eager", attention_mask=torch.ones(1, 2))


# ------------------------------------------------------------------------------ bugs of issue 32, item 6

@pytest.mark.parametrize("search", ["generate", "beam_search"])
def test_a_src_mask_for_a_decoder_only_model_is_refused_pointing_at_attention_mask(search):
    """A left-padding mask passed as src_mask used to change nothing, silently."""
    model = _tiny_lm()
    prompt, mask = torch.tensor([[0, 3, 4]]), torch.tensor([[0, 1, 1]])
    with pytest.raises(ValueError, match=r"src_mask.*decoder-only.*attention_mask"):
        if search == "generate":
            generate(model, prompt, 2, src_mask=mask)
        else:
            beam_search(model, prompt, beam_size=2, max_new_tokens=2, src_mask=mask)


@pytest.mark.parametrize("eos", [13, -1, 2.0, True])
def test_beam_search_refuses_an_eos_token_id_outside_the_vocabulary_as_generate_does(eos):
    model = _tiny_lm()                                  # vocab_size 13: ids 0 .. 12
    for search in (lambda: generate(model, torch.tensor([[1, 2]]), 2, eos_token_id=eos),
                   lambda: beam_search(model, torch.tensor([[1, 2]]), beam_size=2, max_new_tokens=2,
                                       eos_token_id=eos)):
        with pytest.raises(ValueError, match=r"eos_token_id=.* is not a token id of this model's vocabulary \(0 \.\. 12\)"):
            search()
