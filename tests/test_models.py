"""The three architectures: configuration, causality, padding, KV cache, weight tying."""

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from transformer_core.cache import KVCache, StaticKVCache
from transformer_core.models import (POSITIONS, DecoderOnlyLM, EncoderDecoderModel,
                                     EncoderOnlyModel, TransformerConfig)

ATOL, RTOL = 1e-5, 1e-4


def _config(**overrides):
    fields = dict(vocab_size=23, d_model=16, n_heads=4, n_layers=2, max_len=16, dropout=0.0)
    fields.update(overrides)
    return TransformerConfig(**fields)


# --- configuration ----------------------------------------------------------------------------

def test_config_defaults_and_presets():
    config = _config()
    assert config.d_ff == 64 and config.n_kv_heads == 4 and config.head_dim == 4
    assert config.n_encoder_layers == config.n_decoder_layers == 2 and config.src_vocab_size == 23
    gpt2 = TransformerConfig.gpt2()
    assert (gpt2.d_model, gpt2.n_layers, gpt2.activation, gpt2.norm_first, gpt2.position) == \
        (768, 12, "gelu_tanh", True, "learned")
    bert = TransformerConfig.bert(n_layers=2)
    assert (bert.norm_first, bert.n_segments, bert.embedding_norm, bert.layer_norm_eps,
            bert.n_layers) == (False, 2, True, 1e-12, 2)


@pytest.mark.parametrize("overrides,message", [
    (dict(d_model=30), "not divisible by n_heads"),
    (dict(n_kv_heads=3), "n_kv_heads"),
    (dict(position="relative"), "position must be one of"),
    (dict(activation="swish"), "activation must be one of"),
    (dict(dropout=1.0), "dropout"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(d_model=24, n_heads=8, position="rope"), "even"),
])
def test_config_rejects_bad_fields(overrides, message):
    with pytest.raises(ValueError, match=message):
        _config(**overrides)


def test_parameter_counts_of_gpt2_and_bert_presets():
    with torch.device("meta"):  # no memory, no initialisation time
        gpt2 = DecoderOnlyLM(TransformerConfig.gpt2())
        bert = EncoderOnlyModel(TransformerConfig.bert())
    assert gpt2.num_parameters() == 124_439_808          # Hugging Face GPT2LMHeadModel
    assert gpt2.num_parameters(non_embedding=True) == 85_056_000
    assert bert.num_parameters() == 109_514_298          # Hugging Face BertForMaskedLM
    assert gpt2.lm_head.weight is gpt2.embeddings.token.weight


# --- decoder-only -----------------------------------------------------------------------------

def test_decoder_only_loss_is_next_token_cross_entropy_with_ignore_index():
    torch.manual_seed(0)
    model = DecoderOnlyLM(_config())
    idx = torch.randint(0, 23, (2, 7))
    targets = torch.randint(0, 23, (2, 7))
    targets[0, :3] = -100
    logits, loss = model(idx, targets)
    assert logits.shape == (2, 7, 23)
    expected = F.cross_entropy(logits[targets != -100], targets[targets != -100])
    torch.testing.assert_close(loss, expected)
    assert model(idx)[1] is None


def test_weight_tying_can_be_switched_off():
    tied, untied = DecoderOnlyLM(_config()), DecoderOnlyLM(_config(tie_weights=False))
    assert tied.lm_head.weight is tied.embeddings.token.weight
    assert untied.lm_head.weight is not untied.embeddings.token.weight
    assert untied.num_parameters() - tied.num_parameters() == 23 * 16


@pytest.mark.parametrize("position", ["learned", "rope", "alibi", "t5"])
def test_no_information_flows_from_the_future(position):
    torch.manual_seed(1)
    model = DecoderOnlyLM(_config(position=position, n_layers=3))
    idx = torch.randint(0, 23, (1, 8))
    captured = {}

    def keep_embeddings(module, inputs, output):
        output.retain_grad()
        captured["x"] = output

    model.embeddings.register_forward_hook(keep_embeddings)
    logits, _ = model(idx)
    t = 4
    logits[0, t].square().sum().backward()
    grad = captured["x"].grad[0]                                      # (T, d)
    assert (grad[t + 1:] == 0).all(), "position t must not depend on later inputs"
    assert (grad[:t + 1].abs().sum(-1) > 0).all(), "position t should depend on all earlier inputs"


@pytest.mark.parametrize("position", POSITIONS)
def test_cached_forward_equals_full_forward(position):
    torch.manual_seed(2)
    model = DecoderOnlyLM(_config(position=position, n_layers=3, n_kv_heads=2)).eval()
    idx = torch.randint(0, 23, (2, 9))
    with torch.no_grad():
        full, _ = model(idx)
        cache = model.new_cache(batch_size=2)
        pieces = [model(idx[:, :4], cache=cache)[0]]                 # prefill 4 tokens
        pieces += [model(idx[:, t:t + 1], cache=cache)[0] for t in range(4, 7)]  # one at a time
        pieces.append(model(idx[:, 7:], cache=cache)[0])             # then two at once
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=ATOL, rtol=RTOL)
    assert cache.length == 9


def test_cache_overflow_gives_a_clear_error():
    model = DecoderOnlyLM(_config(position="rope")).eval()
    cache = model.new_cache(batch_size=1, max_len=5)
    with torch.no_grad():
        model(torch.zeros(1, 4, dtype=torch.long), cache=cache)
        with pytest.raises(RuntimeError, match=r"capacity is max_len=5.*max_len=6"):
            model(torch.zeros(1, 2, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_static_cache_overflow_is_refused_on_the_host_before_writing(position):
    """Without the host's check, a write past the buffers is a bare IndexError (a device assert on a
    GPU), or, with learned positions, an index past the position table."""
    model = DecoderOnlyLM(_config(position=position)).eval()
    cache = StaticKVCache(2, 1, 5, model.config.n_kv_heads, model.config.head_dim)
    with torch.no_grad():
        model(torch.zeros(1, 4, dtype=torch.long), cache=cache)
        before = cache.keys.clone()
        with pytest.raises(RuntimeError, match=r"StaticKVCache is full.*max_len=5.*holds 4.*2 more"):
            model(torch.zeros(1, 2, dtype=torch.long), cache=cache)
        assert torch.equal(cache.keys, before) and cache.length == 4, "nothing was written"
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)          # the last slot still fits
    assert cache.length == int(cache.position) == 5
    with pytest.raises(RuntimeError, match="StaticKVCache is full"):
        cache.layers[0].append(torch.zeros(1, 4, 1, 4), torch.zeros(1, 4, 1, 4))
    cache.reset()
    assert cache.length == int(cache.position) == 0


def test_token_ids_are_read_on_the_host_only_for_cpu_tensors():
    """On a GPU, int(ids.min()) would make the CPU wait for the device at every decode step. The meta
    device stands in for a GPU here: a forward pass that read a meta tensor's value would raise."""
    with torch.device("meta"):
        model = DecoderOnlyLM(_config()).eval()
        with torch.no_grad():
            cache = model.new_cache(batch_size=1)
            model(torch.zeros(1, 3, dtype=torch.long), cache=cache)            # prefill
            logits, _ = model(torch.zeros(1, 1, dtype=torch.long), cache=cache)   # a decode step
    assert logits.shape == (1, 1, 23)
    model = DecoderOnlyLM(_config()).eval()
    with pytest.raises(ValueError, match=r"token id 23 is outside the vocabulary of 23 ids"):
        model(torch.tensor([[1, 23]]))


def test_learned_positions_beyond_max_len_give_a_clear_error():
    model = DecoderOnlyLM(_config(max_len=6))
    with pytest.raises(ValueError, match="cannot extrapolate"):
        model(torch.zeros(1, 7, dtype=torch.long))


def test_cache_bookkeeping():
    cache = KVCache(n_layers=3, batch_size=2, max_len=10, n_kv_heads=2, head_dim=4,
                    dtype=torch.float16)
    assert cache.nbytes == cache.keys.numel() * 2 + cache.values.numel() * 2
    assert cache.nbytes == 2 * 3 * 2 * 10 * 2 * 4 * 2
    k = torch.randn(2, 2, 3, 4).half()
    for layer in cache.layers:
        k_all, v_all = layer.append(k, -k)
    assert cache.length == 3 and k_all.shape == (2, 2, 3, 4)
    assert k_all.data_ptr() == cache.keys[2].data_ptr(), "append must return views, not copies"
    cache.reorder(torch.tensor([1, 1]))
    assert torch.equal(cache.layers[0].keys[0, :, :3], k[1])
    cache.layers[0].append(k, k)
    with pytest.raises(RuntimeError, match="reset"):
        cache.length
    cache.reset()
    assert cache.length == 0
    with pytest.raises(ValueError, match="batch_size"):
        cache.layers[0].append(torch.randn(3, 2, 1, 4).half(), torch.randn(3, 2, 1, 4).half())


def test_new_cache_matches_the_model():
    model = DecoderOnlyLM(_config(n_kv_heads=1))
    cache = model.new_cache(batch_size=3)
    assert cache.keys.shape == (2, 3, 1, 16, 4) and cache.keys.dtype == torch.float32


# --- encoder-only -----------------------------------------------------------------------------

@pytest.mark.parametrize("position", ["learned", "t5", "alibi", "rope"])
def test_encoder_output_ignores_padding_content(position):
    torch.manual_seed(3)
    model = EncoderOnlyModel(_config(position=position, n_segments=2, embedding_norm=True,
                                     norm_first=False, final_norm=False)).eval()
    ids = torch.randint(0, 23, (2, 8))
    attention_mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    other = ids.clone()
    other[1, 5:] = torch.randint(0, 23, (3,))
    segments = torch.tensor([[0] * 4 + [1] * 4, [0] * 3 + [1] * 5])
    a = model(ids, segment_ids=segments, attention_mask=attention_mask)
    b = model(other, segment_ids=segments, attention_mask=attention_mask)
    torch.testing.assert_close(a[1, :5], b[1, :5], atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(a[0], b[0])
    assert not torch.allclose(model(ids, attention_mask=attention_mask), a), "segments matter"


def test_encoder_is_bidirectional():
    torch.manual_seed(4)
    model = EncoderOnlyModel(_config())
    ids = torch.randint(0, 23, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % 23
    assert not torch.allclose(model(ids)[0, 0], model(changed)[0, 0])


def test_masked_lm_head_is_tied_and_loss_uses_only_targets():
    torch.manual_seed(5)
    model = EncoderOnlyModel(_config(n_segments=2))
    assert model.mlm_head.vocab_proj.weight is model.embeddings.token.weight
    ids = torch.randint(0, 23, (2, 6))
    targets = torch.full((2, 6), -100)
    targets[0, 2], targets[1, 4] = 7, 3
    logits, loss = model.masked_lm(ids, targets)
    expected = F.cross_entropy(torch.stack([logits[0, 2], logits[1, 4]]), torch.tensor([7, 3]))
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(model.mlm_logits(model(ids)), logits)
    with pytest.raises(ValueError, match="n_segments"):
        EncoderOnlyModel(_config())(ids, segment_ids=torch.zeros_like(ids))


# --- encoder-decoder --------------------------------------------------------------------------

def test_encoder_decoder_shapes_loss_and_cross_attention_maps():
    torch.manual_seed(6)
    model = EncoderDecoderModel(_config(src_vocab_size=11, norm_first=False, final_norm=False))
    src, tgt = torch.randint(0, 11, (2, 7)), torch.randint(0, 23, (2, 5))
    src_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    logits, loss = model(src, tgt, src_mask=src_mask, targets=tgt, need_weights=True)
    assert logits.shape == (2, 5, 23) and loss.ndim == 0
    maps = model.cross_attention_weights()
    assert len(maps) == 2 and maps[0].shape == (2, 4, 5, 7)
    assert (maps[1][1, :, :, 4:] == 0).all(), "padded source tokens get no attention"
    other = src.clone()
    other[1, 4:] = 0
    torch.testing.assert_close(model(other, tgt, src_mask=src_mask)[0], logits, atol=ATOL, rtol=RTOL)
    model(src, tgt)
    with pytest.raises(RuntimeError, match="need_weights=True"):
        model.cross_attention_weights()


@pytest.mark.parametrize("position", ["sinusoidal", "t5", "rope"])
def test_encoder_decoder_cached_decoding_equals_full(position):
    torch.manual_seed(7)
    model = EncoderDecoderModel(_config(position=position, scale_embeddings=True)).eval()
    src, tgt = torch.randint(0, 23, (2, 6)), torch.randint(0, 23, (2, 5))
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory)
        cache = model.new_cache(batch_size=2)
        steps = [model.decode(tgt[:, :2], memory, cache=cache)]
        steps += [model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(2, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=RTOL)


class _ProjectionsOf(TorchFunctionMode):
    """Records the rows of ``source`` each time a linear map (``F.linear``, what every projection
    calls) is applied to it: ``with _ProjectionsOf(memory) as projected: ...`` fills the list."""

    def __init__(self, source: torch.Tensor):
        super().__init__()
        self.source, self.rows = source, []

    def __enter__(self):
        super().__enter__()
        return self.rows

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.linear and args[0] is self.source:
            self.rows.append(args[0].shape[1])
        return func(*args, **(kwargs or {}))


def test_encoder_decoder_cache_projects_the_source_once_and_follows_reorder_and_reset():
    torch.manual_seed(9)
    model = EncoderDecoderModel(_config(n_kv_heads=2)).eval()
    src, tgt = torch.randint(0, 23, (2, 6)), torch.randint(0, 23, (2, 4))
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory)
        cache = model.new_cache(batch_size=2)
        with _ProjectionsOf(memory) as projected:
            steps = [model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(4)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=RTOL)
        n_layers = len(model.transformer.decoder_layers)
        assert projected == [6] * n_layers                       # once per layer, not once per step
        assert cache.nbytes == 2 * cache.keys.nbytes + n_layers * 2 * (2 * 2 * 6 * cache.head_dim * 4)

        cache.reorder(torch.tensor([1, 1]))                      # both rows now continue sequence 1
        swapped = model.decode(tgt[1:, 3:].expand(2, 1), memory, cache=cache)  # memory is ignored now
        fresh = model.new_cache(batch_size=1)
        for t in range(4):
            model.decode(tgt[1:, t:t + 1], memory[1:], cache=fresh)
        expected = model.decode(tgt[1:, 3:], memory[1:], cache=fresh)
        torch.testing.assert_close(swapped, expected.expand(2, 1, -1), atol=ATOL, rtol=RTOL)

        with pytest.raises(ValueError, match="call cache.reset"):
            model.decode(tgt[:, :1], model.encode(src[:, :5]), cache=cache)
        cache.reset()
        assert all(layer.memory_keys is None for layer in cache.layers)
        torch.testing.assert_close(model.decode(tgt[:, :1], memory, cache=cache), full[:, :1],
                                   atol=ATOL, rtol=RTOL)


def test_decoder_is_causal_in_encoder_decoder_model():
    torch.manual_seed(8)
    model = EncoderDecoderModel(_config())
    src, tgt = torch.randint(0, 23, (1, 6)), torch.randint(0, 23, (1, 5))
    changed = tgt.clone()
    changed[0, 3] = (tgt[0, 3] + 1) % 23
    a, b = model(src, tgt)[0], model(src, changed)[0]
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


# --- bugs of issue 32, item 6 -----------------------------------------------------------------

@pytest.mark.parametrize("position", ["sinusoidal", "learned", "rope", "none"])
def test_encoder_decoder_static_cache_equals_uncached_decode(position):
    """A StaticKVCache used to write every step into slot 0 (its length stayed 0): wrong logits, silently."""
    torch.manual_seed(11)
    model = EncoderDecoderModel(_config(position=position, n_kv_heads=2)).eval()
    src, tgt = torch.randint(0, 23, (2, 6)), torch.randint(0, 23, (2, 5))
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory)
        cache = StaticKVCache(2, 2, 8, model.config.n_kv_heads, model.config.head_dim)
        steps = [model.decode(tgt[:, :2], memory, cache=cache)]
        steps += [model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(2, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=RTOL)
    assert cache.length == int(cache.position) == 5


@pytest.mark.parametrize("position", ["alibi", "t5"])
def test_encoder_decoder_static_cache_with_a_distance_bias_is_refused(position):
    model = EncoderDecoderModel(_config(position=position)).eval()
    memory = model.encode(torch.randint(0, 23, (1, 4)))
    cache = StaticKVCache(2, 1, 8, model.config.n_kv_heads, model.config.head_dim)
    with pytest.raises(ValueError, match=r"StaticKVCache needs absolute positions.*new_cache\(\)"):
        model.decode(torch.zeros(1, 1, dtype=torch.long), memory, cache=cache)


def test_transformer_decode_with_a_static_cache_equals_uncached_decode():
    from transformer_core.attention import causal_mask
    from transformer_core.models import Transformer

    torch.manual_seed(12)
    model = Transformer(d_model=16, n_heads=4, n_encoder_layers=1, n_decoder_layers=2, d_ff=32,
                        dropout=0.0).eval()
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, causal_mask(4))
        cache = StaticKVCache(2, 2, 7, 4, 4)
        steps = [model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(4)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=RTOL)
        with pytest.raises(ValueError, match="tgt_mask.*StaticKVCache"):
            model.decode(tgt[:, :1], memory, causal_mask(1, 5), cache=cache)


@pytest.mark.parametrize("model_class", [DecoderOnlyLM, EncoderDecoderModel])
def test_new_cache_max_len_zero_is_refused_not_replaced_by_the_default(model_class):
    model = model_class(_config())
    assert model.new_cache(2, max_len=3).max_len == 3 and model.new_cache(2).max_len == 16
    with pytest.raises(ValueError, match="max_len must be a positive integer, got 0"):
        model.new_cache(2, max_len=0)


def test_segment_ids_outside_the_segment_table_are_a_value_error():
    model = EncoderOnlyModel(_config(n_segments=2, norm_first=False, final_norm=False))
    ids = torch.randint(0, 23, (1, 4))
    with pytest.raises(ValueError, match=r"segment_ids.*2.*0 \.\. 1.*n_segments"):
        model(ids, segment_ids=torch.tensor([[0, 1, 2, 0]]))
    with pytest.raises(ValueError, match=r"segment_ids.*-1"):
        model(ids, segment_ids=torch.tensor([[0, -1, 1, 0]]))
    assert model(ids, segment_ids=torch.tensor([[0, 0, 1, 1]])).shape == (1, 4, 16)
