"""Copy Hugging Face GPT-2, BERT and Llama weights into the library's models.

The library's modules use descriptive names; the checkpoints use their own. This file is the only
place where those checkpoint names appear.

GPT-2 (``GPT2LMHeadModel`` or ``GPT2Model``) -> :class:`~transformer_core.models.DecoderOnlyLM`:

=================================== =================================================
Hugging Face                        transformer_core
=================================== =================================================
``wte`` / ``wpe``                   ``embeddings.token`` / ``embeddings.position``
``h[i].ln_1`` / ``h[i].ln_2``       ``layers[i].self_attn_norm`` / ``layers[i].ffn_norm``
``h[i].attn.c_attn``                ``layers[i].self_attn.qkv_proj``
``h[i].attn.c_proj``                ``layers[i].self_attn.out_proj``
``h[i].mlp.c_fc`` / ``mlp.c_proj``  ``layers[i].ffn.up_proj`` / ``ffn.down_proj``
``ln_f``                            ``final_norm``
``lm_head`` (tied to ``wte``)       ``lm_head`` (tied to ``embeddings.token``)
=================================== =================================================

GPT-2's linear layers are ``Conv1D`` modules whose weight is stored as ``(in, out)``, the transpose
of ``nn.Linear``'s ``(out, in)``; ``c_attn`` holds the query, key and value projections side by
side (columns ``[q | k | v]``), which transposed is the layout of the library's ``qkv_proj`` (rows
``[q; k; v]``). ``gelu_new`` is the tanh approximation of GELU.

BERT (``BertModel`` or ``BertForMaskedLM``) -> :class:`~transformer_core.models.EncoderOnlyModel`:

============================================== ==========================================
Hugging Face                                   transformer_core
============================================== ==========================================
``embeddings.word_embeddings``                 ``embeddings.token``
``embeddings.position_embeddings``             ``embeddings.position``
``embeddings.token_type_embeddings``           ``embeddings.segment``
``embeddings.LayerNorm``                       ``embeddings.norm``
``layer[i].attention.self.query/key/value``    ``layers[i].self_attn.qkv_proj`` (stacked rows)
``layer[i].attention.output.dense``            ``layers[i].self_attn.out_proj``
``layer[i].attention.output.LayerNorm``        ``layers[i].self_attn_norm``
``layer[i].intermediate.dense``                ``layers[i].ffn.up_proj``
``layer[i].output.dense``                      ``layers[i].ffn.down_proj``
``layer[i].output.LayerNorm``                  ``layers[i].ffn_norm``
``cls.predictions.transform.dense``            ``mlm_head.transform``
``cls.predictions.transform.LayerNorm``        ``mlm_head.norm``
``cls.predictions.decoder`` (+ ``bias``)       ``mlm_head.vocab_proj``
============================================== ==========================================

Llama (``LlamaForCausalLM`` or ``LlamaModel``; SmolLM2 is one) -> a Llama-style
:class:`~transformer_core.models.DecoderOnlyLM` (:meth:`~transformer_core.models.TransformerConfig.llama`):

======================================= ==================================================
Hugging Face                            transformer_core
======================================= ==================================================
``embed_tokens``                        ``embeddings.token``
``layers[i].input_layernorm``           ``layers[i].self_attn_norm`` (RMSNorm)
``layers[i].self_attn.q_proj/k_proj``   ``layers[i].self_attn.qkv_proj``, its q and k rows (permuted
                                        head by head unless ``rope_pairing="half"``)
``layers[i].self_attn.v_proj``          ``layers[i].self_attn.qkv_proj``, its v rows
``layers[i].self_attn.o_proj``          ``layers[i].self_attn.out_proj``
``layers[i].post_attention_layernorm``  ``layers[i].ffn_norm`` (RMSNorm)
``layers[i].mlp.gate_proj/up_proj``     ``layers[i].ffn.gate_proj/up_proj`` (SwiGLU)
``layers[i].mlp.down_proj``             ``layers[i].ffn.down_proj``
``norm``                                ``final_norm``
``lm_head`` (tied to ``embed_tokens``)  ``lm_head`` (tied to ``embeddings.token``)
======================================= ==================================================

The ``transformers`` package is not imported here: the converters read the modules they are given.
"""

from __future__ import annotations

import torch
from torch import nn

from ..models import DecoderOnlyLM, EncoderOnlyModel, TransformerConfig
from ..positions import ROPE_PAIRINGS
from ._placement import finish, in_source_dtype

__all__ = ["gpt2_from_hf", "bert_from_hf", "llama_from_hf", "half_to_interleaved"]

# Hugging Face activation names -> the library's.
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh"}


def _activation(name, model_name: str, field: str) -> str:
    if name not in _ACTIVATIONS:
        raise ValueError(f"{model_name} uses {field}={name!r}, which the library does not implement; "
                         f"supported: {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _weight_out_in(module: nn.Module) -> torch.Tensor:
    """The weight of a linear map as ``(out, in)``, from an ``nn.Linear`` or a GPT-2 ``Conv1D``."""
    if isinstance(module, nn.Linear):
        return module.weight
    if type(module).__name__ == "Conv1D":
        return module.weight.t()                                              # (in, out) -> (out, in)
    raise TypeError(f"expected nn.Linear or Conv1D, got {type(module).__name__}")


@torch.no_grad()
def _copy_linear(ours: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    if ours.weight.shape != weight.shape:
        raise ValueError(f"shape mismatch while copying a linear layer: ours {tuple(ours.weight.shape)}, "
                         f"checkpoint {tuple(weight.shape)}")
    ours.weight.copy_(weight)
    if bias is not None:
        ours.bias.copy_(bias)


def _copy_qkv(ours: nn.Module, q: tuple, k: tuple, v: tuple) -> None:
    """Copy a checkpoint's separate query, key and value projections, each ``(weight, bias or None)``
    with weight ``(out, d_model)``, into the stacked rows of ``ours.qkv_proj`` (a ``MultiHeadAttention``)."""
    biases = [bias for _, bias in (q, k, v)]
    _copy_linear(ours.qkv_proj, torch.cat([weight for weight, _ in (q, k, v)]),
                 None if biases[0] is None else torch.cat(biases))


@torch.no_grad()
def _copy_norm(ours: nn.Module, theirs: nn.Module) -> None:
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)


@torch.no_grad()
def _copy_table(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    if ours.shape != theirs.shape:
        raise ValueError(f"shape mismatch while copying an embedding table: ours {tuple(ours.shape)}, "
                         f"checkpoint {tuple(theirs.shape)}")
    ours.copy_(theirs)


def _hf_config(hf_model: nn.Module, model_type: str, function: str):
    config = getattr(hf_model, "config", None)
    if getattr(config, "model_type", None) != model_type:
        raise TypeError(f"{function} expects a Hugging Face {model_type!r} model (e.g. from "
                        f"transformers' from_pretrained), got {type(hf_model).__name__} with "
                        f"model_type={getattr(config, 'model_type', None)!r}")
    return config


def gpt2_from_hf(hf_model: nn.Module) -> DecoderOnlyLM:
    """A :class:`~transformer_core.models.DecoderOnlyLM` with the weights of a Hugging Face GPT-2.

    The sizes come from the Hugging Face config (``n_embd``, ``n_head``, ``n_layer``, ``n_inner``,
    ``vocab_size``, ``n_positions``, ``layer_norm_epsilon``, ``activation_function``); the result is
    a Pre-LN decoder with learned positions, a final LayerNorm and an output head tied to the token
    embedding (untied only if the checkpoint's head is untied). The library has one dropout
    probability; it takes ``resid_pdrop``. The model is returned on the source model's device and
    dtype, in its train/eval mode.

    Args:
        hf_model: a ``transformers`` ``GPT2LMHeadModel`` or ``GPT2Model`` (a ``GPT2Model`` has no
            head; ours then uses the tied token embedding, as ``GPT2LMHeadModel`` does).

    Returns:
        A ``DecoderOnlyLM`` whose logits equal the Hugging Face model's (up to float rounding).

    Shapes:
        the returned model maps ids ``(B, T)`` to logits ``(B, T, vocab_size)``, ``T <= n_positions``.

    Example:
        >>> from transformers import GPT2LMHeadModel
        >>> ours = gpt2_from_hf(GPT2LMHeadModel.from_pretrained("gpt2"))
        >>> ours.config.d_model, ours.config.n_layers
        (768, 12)
    """
    config = _hf_config(hf_model, "gpt2", "gpt2_from_hf")
    body = getattr(hf_model, "transformer", hf_model)
    head = getattr(hf_model, "lm_head", None)
    name = type(hf_model).__name__
    _require(not getattr(config, "add_cross_attention", False),
             f"{name} has cross-attention (add_cross_attention=True); a decoder-only model has none")
    _require(getattr(config, "scale_attn_weights", True),
             f"{name} does not scale attention scores by 1/sqrt(head_dim) (scale_attn_weights=False); "
             "the library always does")
    _require(not getattr(config, "scale_attn_by_inverse_layer_idx", False),
             f"{name} divides attention scores by the layer index "
             "(scale_attn_by_inverse_layer_idx=True), which the library does not implement")
    activation = _activation(config.activation_function, name, "activation_function")
    tied = head is None or head.weight is body.wte.weight
    d_ff = config.n_inner if config.n_inner is not None else 4 * config.n_embd
    ours = DecoderOnlyLM(TransformerConfig.gpt2(
        vocab_size=config.vocab_size, d_model=config.n_embd, n_heads=config.n_head,
        n_layers=config.n_layer, d_ff=d_ff, max_len=config.n_positions, dropout=config.resid_pdrop,
        activation=activation, layer_norm_eps=config.layer_norm_epsilon, tie_weights=tied))
    ours = in_source_dtype(ours, hf_model)

    _copy_table(ours.embeddings.token.weight, body.wte.weight)
    _copy_table(ours.embeddings.position.weight, body.wpe.weight)
    for mine, block in zip(ours.layers, body.h):
        # (3d, d): rows [q; k; v], the layout of qkv_proj
        _copy_linear(mine.self_attn.qkv_proj, _weight_out_in(block.attn.c_attn), block.attn.c_attn.bias)
        _copy_linear(mine.self_attn.out_proj, _weight_out_in(block.attn.c_proj), block.attn.c_proj.bias)
        _copy_linear(mine.ffn.up_proj, _weight_out_in(block.mlp.c_fc), block.mlp.c_fc.bias)
        _copy_linear(mine.ffn.down_proj, _weight_out_in(block.mlp.c_proj), block.mlp.c_proj.bias)
        _copy_norm(mine.self_attn_norm, block.ln_1)
        _copy_norm(mine.ffn_norm, block.ln_2)
    _copy_norm(ours.final_norm, body.ln_f)
    if not tied:
        _copy_linear(ours.lm_head, head.weight, None)
    return finish(ours, hf_model)


def bert_from_hf(hf_model: nn.Module) -> EncoderOnlyModel:
    """A :class:`~transformer_core.models.EncoderOnlyModel` with the weights of a Hugging Face BERT.

    The sizes come from the Hugging Face config (``hidden_size``, ``num_attention_heads``,
    ``num_hidden_layers``, ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``,
    ``type_vocab_size``, ``layer_norm_eps``, ``hidden_act``); the result is a Post-LN encoder with
    learned positions, segment (token-type) embeddings and a LayerNorm after the embeddings. From a
    ``BertForMaskedLM`` the masked-LM head is copied too; from a ``BertModel`` our ``mlm_head``
    keeps its random initialisation (a ``BertModel`` has none). BERT's pooler (the tanh layer over
    [CLS] used for next-sentence prediction) has no counterpart and is not copied. The library has
    one dropout probability; it takes ``hidden_dropout_prob``. The model is returned on the source
    model's device and dtype, in its train/eval mode.

    Call the result with ``segment_ids`` where Hugging Face takes ``token_type_ids`` (the same
    values) and the same ``attention_mask`` (1 on real tokens, 0 on padding).

    Args:
        hf_model: a ``transformers`` ``BertModel`` or ``BertForMaskedLM``.

    Returns:
        An ``EncoderOnlyModel`` whose hidden states equal the Hugging Face ``last_hidden_state``
        (up to float rounding).

    Shapes:
        the returned model maps ids ``(B, T)`` to hidden states ``(B, T, hidden_size)``.

    Example:
        >>> from transformers import BertModel
        >>> ours = bert_from_hf(BertModel.from_pretrained("bert-base-uncased"))
        >>> ours.config.layer_norm_eps
        1e-12
    """
    config = _hf_config(hf_model, "bert", "bert_from_hf")
    body = getattr(hf_model, "bert", hf_model)
    mlm = getattr(getattr(hf_model, "cls", None), "predictions", None)
    name = type(hf_model).__name__
    is_decoder = getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False)
    _require(not is_decoder,
             f"{name} is configured as a decoder (is_decoder / add_cross_attention); only the "
             "bidirectional encoder can be converted")
    position_type = getattr(config, "position_embedding_type", "absolute")
    _require(position_type == "absolute",
             f"{name} uses position_embedding_type={position_type!r}; only 'absolute' (learned "
             "absolute positions) is supported")
    activation = _activation(config.hidden_act, name, "hidden_act")
    word_embeddings = body.embeddings.word_embeddings.weight
    tied = mlm is None or mlm.decoder.weight is word_embeddings
    ours = EncoderOnlyModel(TransformerConfig.bert(
        vocab_size=config.vocab_size, d_model=config.hidden_size, n_heads=config.num_attention_heads,
        n_layers=config.num_hidden_layers, d_ff=config.intermediate_size,
        max_len=config.max_position_embeddings, n_segments=config.type_vocab_size,
        dropout=config.hidden_dropout_prob, activation=activation,
        layer_norm_eps=config.layer_norm_eps, tie_weights=tied))
    ours = in_source_dtype(ours, hf_model)

    embeddings = body.embeddings
    _copy_table(ours.embeddings.token.weight, word_embeddings)
    _copy_table(ours.embeddings.position.weight, embeddings.position_embeddings.weight)
    _copy_table(ours.embeddings.segment.weight, embeddings.token_type_embeddings.weight)
    _copy_norm(ours.embeddings.norm, embeddings.LayerNorm)
    for mine, block in zip(ours.layers, body.encoder.layer):
        attention = block.attention
        _copy_qkv(mine.self_attn, *((part.weight, part.bias) for part in
                                    (attention.self.query, attention.self.key, attention.self.value)))
        _copy_linear(mine.self_attn.out_proj, attention.output.dense.weight, attention.output.dense.bias)
        _copy_norm(mine.self_attn_norm, attention.output.LayerNorm)
        _copy_linear(mine.ffn.up_proj, block.intermediate.dense.weight, block.intermediate.dense.bias)
        _copy_linear(mine.ffn.down_proj, block.output.dense.weight, block.output.dense.bias)
        _copy_norm(mine.ffn_norm, block.output.LayerNorm)
    if mlm is not None:
        head = ours.mlm_head
        _copy_linear(head.transform, mlm.transform.dense.weight, mlm.transform.dense.bias)
        _copy_norm(head.norm, mlm.transform.LayerNorm)
        output_bias = getattr(mlm.decoder, "bias", None)
        if output_bias is None:
            output_bias = mlm.bias
        _copy_linear(head.vocab_proj, mlm.decoder.weight, output_bias)
    return finish(ours, hf_model)


def half_to_interleaved(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder the rows of a query or key projection from the half-split RoPE layout to the
    interleaved one, head by head.

    In the half-split layout (Hugging Face's Llama) feature ``i`` of a head is rotated together
    with feature ``i + head_dim/2``; in the interleaved layout (RoFormer, this library's default)
    with its neighbour. Row ``2i + j`` of each head of the result is row ``j * head_dim/2 + i`` of
    the input (``j`` in 0, 1): the pair ``(i, i + head_dim/2)`` becomes the pair ``(2i, 2i+1)`` and
    is rotated by the same angle.

    Args:
        weight: ``(n_heads * head_dim, d_in)`` weight or ``(n_heads * head_dim,)`` bias.
        n_heads: heads the rows belong to (``n_kv_heads`` for the key projection).

    Shapes:
        ``(n_heads * head_dim, ...)`` -> the same shape.

    Example:
        >>> half_to_interleaved(torch.arange(8.0), n_heads=2)
        tensor([0., 2., 1., 3., 4., 6., 5., 7.])
    """
    rows = weight.shape[0]
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"half_to_interleaved: {rows} rows do not split into {n_heads} heads of an even width")
    head_dim = rows // n_heads
    rest = weight.shape[1:]
    return (weight.reshape(n_heads, 2, head_dim // 2, *rest)       # (heads, half j, pair i, ...)
            .transpose(1, 2)                                          # (heads, pair i, half j, ...)
            .reshape(rows, *rest))


def _rope_theta(config, name: str) -> float:
    """RoPE's base from a Llama config: ``rope_parameters`` (transformers 5) or ``rope_theta`` and
    ``rope_scaling`` (transformers 4); only plain RoPE (``rope_type`` ``"default"``) is supported."""
    parameters = getattr(config, "rope_parameters", None)
    if isinstance(parameters, dict) and "rope_theta" in parameters:
        rope_type = parameters.get("rope_type", parameters.get("type", "default"))
        theta = parameters["rope_theta"]
    else:
        scaling = getattr(config, "rope_scaling", None) or {}
        rope_type = scaling.get("rope_type", scaling.get("type", "default"))
        theta = getattr(config, "rope_theta", 10000.0)
    _require(rope_type == "default",
             f"{name} uses RoPE scaling rope_type={rope_type!r} (e.g. Llama 3.1's long-context frequencies); "
             "the library implements plain RoPE only (rope_type 'default')")
    return float(theta)


def llama_from_hf(hf_model: nn.Module, *, rope_pairing: str = "interleaved") -> DecoderOnlyLM:
    """A Llama-style :class:`~transformer_core.models.DecoderOnlyLM` with the weights of a Hugging
    Face Llama (SmolLM2, TinyLlama, Llama 2 and 3 without RoPE scaling).

    The sizes come from the Hugging Face config (``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads``, ``num_hidden_layers``, ``intermediate_size``, ``vocab_size``,
    ``max_position_embeddings``, ``rms_norm_eps``, RoPE's ``rope_theta``); the result is
    :meth:`TransformerConfig.llama <transformer_core.models.TransformerConfig.llama>`: RMSNorm,
    SwiGLU, RoPE in every self-attention, grouped-query attention (its KV cache holds
    ``num_key_value_heads`` heads), the head tied to the token embedding when the checkpoint's is.
    The model is returned on the source model's device and dtype, in its train/eval mode.

    Why the query and key weights are permuted: RoPE rotates pairs of features of every query and
    key, and which features form a pair is a convention of the code, not of the weights. Hugging
    Face's Llama rotates feature ``i`` of a head with feature ``i + head_dim/2`` (``rotate_half``);
    the library, like the RoFormer paper and Meta's original Llama code, rotates ``2i`` with
    ``2i + 1``. Copied as they are, Hugging Face's weights would put into pair ``(2i, 2i+1)`` two
    features that were trained to rotate with other partners and at other frequencies, and the
    logits would be wrong while every shape fits. Reordering the rows of ``W_q`` and ``W_k`` (each
    head's ``[x_0 .. x_{d/2-1} | x_{d/2} .. x_{d-1}]`` -> ``[x_0, x_{d/2}, x_1, x_{d/2+1}, ...]``,
    :func:`half_to_interleaved`) moves each trained pair next to each other, at the position that
    gets its frequency; since queries and keys are permuted alike, every score ``q . k`` is the same
    sum in another order. Values and ``W_o`` are not rotated and are copied as they are. (Hugging
    Face's own conversion script from Meta's checkpoints applies the inverse permutation.) With
    ``rope_pairing="half"`` the model rotates Hugging Face's way and no row is moved.

    Args:
        hf_model: a ``transformers`` ``LlamaForCausalLM`` or ``LlamaModel`` (a ``LlamaModel`` has no
            head; ours then ties it to the token embedding).
        rope_pairing: the returned model's RoPE convention: ``"interleaved"`` (the library's default,
            weights permuted) or ``"half"`` (Hugging Face's, weights copied unchanged).

    Returns:
        A ``DecoderOnlyLM`` whose logits equal the Hugging Face model's (up to float rounding).

    Shapes:
        the returned model maps ids ``(B, T)`` to logits ``(B, T, vocab_size)``.

    Example:
        >>> from transformer_core.convert import load_smollm2
        >>> hf_model, tokenizer = load_smollm2()
        >>> ours = llama_from_hf(hf_model)
        >>> ours.config.n_heads, ours.config.n_kv_heads
        (9, 3)
    """
    config = _hf_config(hf_model, "llama", "llama_from_hf")
    name = type(hf_model).__name__
    _require(rope_pairing in ROPE_PAIRINGS,
             f"llama_from_hf: rope_pairing must be one of {ROPE_PAIRINGS}, got {rope_pairing!r}")
    body = getattr(hf_model, "model", hf_model)
    head = getattr(hf_model, "lm_head", None)
    d_model, n_heads = config.hidden_size, config.num_attention_heads
    n_kv_heads = getattr(config, "num_key_value_heads", None) or n_heads
    head_dim = getattr(config, "head_dim", None) or d_model // n_heads
    _require(head_dim * n_heads == d_model,
             f"{name} has head_dim={head_dim} with {n_heads} heads of a {d_model}-wide model; the library's "
             "heads are d_model // n_heads wide")
    _require(config.hidden_act == "silu",
             f"{name} uses hidden_act={config.hidden_act!r}; a Llama MLP is SwiGLU (hidden_act='silu')")
    attention_bias = bool(getattr(config, "attention_bias", False))
    mlp_bias = bool(getattr(config, "mlp_bias", False))
    _require(attention_bias == mlp_bias,
             f"{name} has attention_bias={attention_bias} but mlp_bias={mlp_bias}; the library's one `bias` "
             "switch sets both")
    theta = _rope_theta(config, name)
    tied = head is None or head.weight is body.embed_tokens.weight
    ours = DecoderOnlyLM(TransformerConfig.llama(
        vocab_size=config.vocab_size, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
        n_layers=config.num_hidden_layers, d_ff=config.intermediate_size,
        max_len=config.max_position_embeddings, dropout=float(getattr(config, "attention_dropout", 0.0)),
        layer_norm_eps=config.rms_norm_eps, rope_theta=theta, rope_pairing=rope_pairing,
        bias=attention_bias, tie_weights=tied))
    ours = in_source_dtype(ours, hf_model)

    def rope_rows(tensor, heads):
        if tensor is None or rope_pairing == "half":
            return tensor
        return half_to_interleaved(tensor, heads)

    _copy_table(ours.embeddings.token.weight, body.embed_tokens.weight)
    for mine, block in zip(ours.layers, body.layers):
        attention, mlp = block.self_attn, block.mlp
        _copy_qkv(mine.self_attn,
                  (rope_rows(attention.q_proj.weight, n_heads), rope_rows(attention.q_proj.bias, n_heads)),
                  (rope_rows(attention.k_proj.weight, n_kv_heads), rope_rows(attention.k_proj.bias, n_kv_heads)),
                  (attention.v_proj.weight, attention.v_proj.bias))
        _copy_linear(mine.self_attn.out_proj, attention.o_proj.weight, attention.o_proj.bias)
        _copy_linear(mine.ffn.gate_proj, mlp.gate_proj.weight, mlp.gate_proj.bias)
        _copy_linear(mine.ffn.up_proj, mlp.up_proj.weight, mlp.up_proj.bias)
        _copy_linear(mine.ffn.down_proj, mlp.down_proj.weight, mlp.down_proj.bias)
        _copy_gain(mine.self_attn_norm, block.input_layernorm)
        _copy_gain(mine.ffn_norm, block.post_attention_layernorm)
    _copy_gain(ours.final_norm, body.norm)
    if not tied:
        _copy_linear(ours.lm_head, head.weight, None)
    return finish(ours, hf_model)


@torch.no_grad()
def _copy_gain(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy an RMSNorm's gain (it has no bias)."""
    _copy_table(ours.weight, theirs.weight)
