"""Position encodings against their papers' definitions and their defining properties."""

import math

import pytest
import torch

from transformer_core.positions import (LearnedPositionalEmbedding, RelativePositionBias,
                                        SinusoidalPositionalEncoding, alibi_bias, alibi_slopes,
                                        apply_rope, sinusoidal_encoding, t5_relative_bucket)


# --- sinusoidal -------------------------------------------------------------------------------

def test_sinusoidal_matches_the_2017_formula():
    table = sinusoidal_encoding(50, 16)
    assert table.shape == (50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_rotation_property():
    """PE(p + k) = R(k) PE(p) for each (sin, cos) pair, with R(k) depending only on k."""
    d_model, k = 12, 5
    table = sinusoidal_encoding(40, d_model).double()
    for i in range(d_model // 2):
        w = 10000 ** (-2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        rotation = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)  # acts on (sin, cos)
        for p in (0, 3, 20, 34):
            pair = table[p, 2 * i:2 * i + 2]
            torch.testing.assert_close(rotation @ pair, table[p + k, 2 * i:2 * i + 2],
                                       atol=1e-6, rtol=0)


def test_sinusoidal_rejects_odd_width():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(4, 7)


def test_sinusoidal_module_adds_rows_from_offset():
    module = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.zeros(2, 3, 8)
    torch.testing.assert_close(module(x, offset=4), sinusoidal_encoding(10, 8)[4:7].expand(2, 3, 8))
    assert "table" not in module.state_dict()
    with pytest.raises(ValueError, match="larger max_len"):
        module(torch.zeros(1, 11, 8))


def test_learned_positions_cannot_extrapolate():
    module = LearnedPositionalEmbedding(max_len=6, d_model=4)
    x = torch.zeros(1, 4, 4)
    torch.testing.assert_close(module(x, offset=2)[0], module.weight[2:6].detach())
    with pytest.raises(ValueError, match="cannot extrapolate"):
        module(torch.zeros(1, 7, 4))
    with pytest.raises(ValueError, match="cannot extrapolate"):
        module(x, offset=3)


# --- T5 relative buckets ----------------------------------------------------------------------

def _t5_bucket_reference(relative: int, bidirectional: bool, num_buckets: int, max_distance: int):
    """Closed form of T5's rule, for one integer, written independently of the library."""
    offset = 0
    if bidirectional:
        num_buckets //= 2
        if relative > 0:
            offset = num_buckets
        distance = abs(relative)
    else:
        distance = max(-relative, 0)
    exact = num_buckets // 2
    if distance < exact:
        return offset + distance
    scaled = math.log(distance / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    return offset + min(exact + int(scaled), num_buckets - 1)


@pytest.mark.parametrize("bidirectional,num_buckets,max_distance",
                         [(True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 16, 64)])
def test_t5_buckets_match_closed_form(bidirectional, num_buckets, max_distance):
    relative = torch.arange(-300, 301)
    ours = t5_relative_bucket(relative, bidirectional, num_buckets, max_distance)
    expected = [_t5_bucket_reference(r, bidirectional, num_buckets, max_distance)
                for r in relative.tolist()]
    assert ours.dtype == torch.long
    assert ours.tolist() == expected


def test_t5_bucket_boundary_values():
    def bucket(r, bidirectional=True):
        return t5_relative_bucket(torch.tensor([r]), bidirectional).item()
    # bidirectional, 32 buckets: 16 per direction, 8 exact, log-spaced up to 128
    assert [bucket(r) for r in (0, -1, -7, -8, -20, -127, -128, -1000)] == [0, 1, 7, 8, 10, 15, 15, 15]
    assert [bucket(r) for r in (1, 7, 8, 1000)] == [17, 23, 24, 31]
    # causal: keys after the query share bucket 0; 16 exact buckets
    assert [bucket(r, False) for r in (5, 0, -15, -16, -40, -128)] == [0, 0, 15, 16, 23, 31]


def test_relative_position_bias_looks_up_buckets_per_head():
    module = RelativePositionBias(3, bidirectional=False, num_buckets=8, max_distance=16)
    bias = module(2, 5)
    assert bias.shape == (1, 3, 2, 5)
    # query 0 of 2 sits at position 3 of 5; key 1 is two positions earlier
    bucket = t5_relative_bucket(torch.tensor(1 - 3), False, 8, 16)
    torch.testing.assert_close(bias[0, :, 0, 1], module.embedding.weight[bucket])


# --- ALiBi ------------------------------------------------------------------------------------

def test_alibi_slopes_for_eight_heads_are_half_to_one_over_256():
    expected = torch.tensor([1 / 2 ** h for h in range(1, 9)])
    torch.testing.assert_close(alibi_slopes(8), expected, atol=0, rtol=1e-6)


def _official_slopes(n):
    """The construction of the ALiBi repository, written independently (recursively)."""
    def power_of_two(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + _official_slopes(2 * closest)[0::2][:n - closest]


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 6, 8, 12, 16, 20])
def test_alibi_slopes_match_official_construction(n_heads):
    torch.testing.assert_close(alibi_slopes(n_heads), torch.tensor(_official_slopes(n_heads)),
                               atol=0, rtol=1e-6)


def test_alibi_slopes_for_six_heads_known_values():
    assert alibi_slopes(6).tolist() == [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, 2, 5)
    assert bias.shape == (4, 2, 5)
    slopes = alibi_slopes(4)
    for h in range(4):
        for i, query_pos in enumerate((3, 4)):
            for j in range(5):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(query_pos - j))


# --- RoPE -------------------------------------------------------------------------------------

def test_rope_rotates_interleaved_pairs():
    x = torch.randn(1, 3, 6, generator=torch.Generator().manual_seed(0))
    positions = torch.tensor([0, 2, 5])
    out = apply_rope(x, positions, base=100.0)
    for t, pos in enumerate(positions.tolist()):
        for i in range(3):
            angle = pos * 100.0 ** (-2 * i / 6)
            a, b = x[0, t, 2 * i].item(), x[0, t, 2 * i + 1].item()
            assert out[0, t, 2 * i].item() == pytest.approx(a * math.cos(angle) - b * math.sin(angle), abs=1e-5)
            assert out[0, t, 2 * i + 1].item() == pytest.approx(a * math.sin(angle) + b * math.cos(angle), abs=1e-5)
    torch.testing.assert_close(out[0, 0], x[0, 0])  # position 0 is not rotated


def test_rope_dot_product_depends_only_on_relative_position():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)

    def score(m, n):
        q_m = apply_rope(q[None], torch.tensor([m]))[0]
        k_n = apply_rope(k[None], torch.tensor([n]))[0]
        return (q_m @ k_n).item()

    for shift in (0, 3, -4):
        scores = [score(m, m - shift) for m in (5, 9, 20, 57)]
        assert max(scores) - min(scores) < 1e-4, f"offset {shift}: {scores}"
    assert abs(score(5, 2) - score(5, 4)) > 1e-3  # and it does depend on the offset


def test_rope_preserves_norms_and_needs_even_dim():
    x = torch.randn(2, 4, 7, 8, generator=torch.Generator().manual_seed(2))
    out = apply_rope(x, torch.arange(7))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.randn(2, 5), torch.arange(2))
