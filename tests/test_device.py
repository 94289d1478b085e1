"""course_runtime.device: device choice, autocast dtype, description, peak FLOP/s table, seeding."""

import re

import pytest
import torch

from course_runtime import device as dev

NO_GPU = not torch.cuda.is_available() and not dev._mps_available()


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_pick_device_falls_back_to_cpu(monkeypatch):
    monkeypatch.delenv("TRANSFORMER_CORE_DEVICE", raising=False)
    assert dev.pick_device() == torch.device("cpu")
    assert dev.pick_device("auto") == torch.device("cpu")


def test_pick_device_explicit_cpu_and_env_override(monkeypatch):
    assert dev.pick_device("cpu") == torch.device("cpu")
    assert dev.pick_device(torch.device("cpu")) == torch.device("cpu")
    monkeypatch.setenv("TRANSFORMER_CORE_DEVICE", "cpu")
    assert dev.pick_device() == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_pick_device_unavailable_cuda_says_how_to_fix():
    with pytest.raises(RuntimeError, match="Change runtime type"):
        dev.pick_device("cuda")


def test_pick_device_rejects_unknown_names():
    with pytest.raises(ValueError, match="not a device name"):
        dev.pick_device("gpu please")


def test_autocast_dtype_is_none_on_cpu():
    assert dev.autocast_dtype("cpu") is None
    assert dev.autocast_dtype(torch.device("cpu")) is None


def test_describe_device_on_cpu_mentions_colab():
    text = dev.describe_device("cpu")
    assert "cpu" in text and "float32" in text
    assert "Runtime > Change runtime type > GPU" in text


def test_peak_flops_unknown_for_cpu():
    assert dev.peak_flops("cpu") is None
    assert dev.peak_flops("cpu", torch.bfloat16) is None


def test_a10g_has_no_peak_rather_than_a_guess():
    # NVIDIA publishes no A10G figures; assuming the A10's would make every MFU on it a guess.
    assert dev.lookup_peak_flops("NVIDIA A10G", torch.bfloat16) is None
    assert dev.lookup_peak_flops("NVIDIA A10", torch.bfloat16) == pytest.approx(125.0e12)


@pytest.mark.parametrize("name, dtype, expected_tflops", [
    ("NVIDIA A100-SXM4-80GB", torch.bfloat16, 312.0),
    ("NVIDIA A100-PCIE-40GB", torch.float16, 312.0),
    ("NVIDIA H100 80GB HBM3", torch.bfloat16, 989.4),
    ("NVIDIA H100 PCIe", torch.bfloat16, 756.5),
    ("NVIDIA H200", torch.bfloat16, 989.4),
    ("NVIDIA L4", torch.bfloat16, 121.0),
    ("Tesla T4", torch.float16, 65.0),
    ("Tesla V100-SXM2-16GB", torch.float16, 125.0),
    ("NVIDIA GeForce RTX 4090", torch.bfloat16, 165.2),
    ("NVIDIA GeForce RTX 3090", torch.float32, 35.6),
])
def test_peak_flops_table_lookup(name, dtype, expected_tflops):
    assert dev.lookup_peak_flops(name, dtype) == pytest.approx(expected_tflops * 1e12)


def test_peak_flops_table_is_consistent():
    for pattern, canonical, table in dev.PEAK_TFLOPS:
        assert "fp16" in table and "fp32" in table, canonical
        assert table["fp16"] >= table["fp32"], f"{canonical}: tensor-core fp16 should beat plain fp32"
        if "bf16" in table:
            assert table["bf16"] == table["fp16"], f"{canonical}: bf16 and fp16 tensor rates are equal"
        if "tf32" in table:
            assert table["fp32"] <= table["tf32"] * 1.01 <= table["fp16"] * 1.01, canonical
        assert all(1.0 < v < 3000.0 for v in table.values()), f"{canonical}: TFLOP/s out of range"


def test_peak_flops_missing_dtype_or_gpu_is_none():
    assert dev.lookup_peak_flops("Tesla T4", torch.bfloat16) is None     # Turing has no bf16 units
    assert dev.lookup_peak_flops("Some Future GPU 9000", torch.bfloat16) is None
    assert dev.lookup_peak_flops("NVIDIA A100-SXM4-40GB", torch.float32, tf32=True) == pytest.approx(156e12)
    with pytest.raises(ValueError, match="dtype"):
        dev.lookup_peak_flops("NVIDIA A100", torch.int8)


def test_seed_everything_is_reproducible():
    dev.seed_everything(123)
    first = torch.rand(4)
    dev.seed_everything(123)
    assert torch.equal(first, torch.rand(4))
    with pytest.raises(ValueError, match="non-negative"):
        dev.seed_everything(-1)


@pytest.mark.parametrize("name, gbps", [("NVIDIA H100 80GB HBM3", 3350), ("NVIDIA H100 PCIe", 2000),
                                        ("NVIDIA A100-SXM4-80GB", 2039), ("NVIDIA A100-SXM4-40GB", 1555),
                                        ("Tesla T4", 320), ("NVIDIA L4", 300), ("NVIDIA H200", 4800),
                                        ("NVIDIA A10G", None), ("Some Future GPU", None)])
def test_peak_memory_bandwidth_lookup(name, gbps):
    got = dev.lookup_peak_memory_bandwidth(name)
    assert got == (None if gbps is None else gbps * 1e9)


@pytest.mark.parametrize("name, gbps", [
    ("NVIDIA H100 NVL", 3900),                 # not the SXM's 3,350
    ("NVIDIA H100 80GB HBM3", 3350),           # the SXM5 names no form factor
    ("NVIDIA H100 PCIe", 2000),
    ("NVIDIA GH200 480GB", 4000),              # Grace Hopper with 96 GB HBM3, not the H200's 4,800
    ("NVIDIA GH200 144G HBM3e", 4900),
    ("NVIDIA H200 NVL", 4800),
])
def test_peak_memory_bandwidth_tells_hopper_variants_apart(name, gbps):
    assert dev.lookup_peak_memory_bandwidth(name) == gbps * 1e9


def test_peak_memory_bandwidth_patterns_are_each_reachable():
    # A pattern shadowed by an earlier one (as "h200" shadows "gh200" when listed first) never matches.
    for index, (_, canonical, gbps) in enumerate(dev.PEAK_MEMORY_BANDWIDTH_GBPS):
        earlier = [pattern for pattern, _, _ in dev.PEAK_MEMORY_BANDWIDTH_GBPS[:index]]
        probe = {"GH200 144GB HBM3e": "NVIDIA GH200 144G HBM3e", "GH200 96GB HBM3": "NVIDIA GH200 480GB",
                 "H100 SXM5": "NVIDIA H100 80GB HBM3", "A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
                 "A100 80GB SXM4": "NVIDIA A100-SXM4-80GB", "A100 40GB": "NVIDIA A100-SXM4-40GB",
                 "V100": "Tesla V100-SXM2-16GB", "T4": "Tesla T4"}.get(canonical, f"NVIDIA {canonical}")
        assert not any(re.search(pattern, probe.lower()) for pattern in earlier), canonical
        assert dev.lookup_peak_memory_bandwidth(probe) == gbps * 1e9, canonical


def test_peak_memory_bandwidth_is_unknown_for_the_cpu():
    assert dev.peak_memory_bandwidth("cpu") is None


def test_cpu_bfloat16_probe_follows_torch_and_sets_the_cpu_preset(monkeypatch):
    from transformer_core import train
    expected = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert dev.cpu_has_native_bfloat16() == expected
    assert train.PRESETS["shakespeare-cpu"].dtype == ("bfloat16" if expected else "float32")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert dev.cpu_has_native_bfloat16() is False            # a build without the probes: float32


def test_describe_device_speaks_the_language_in_force(monkeypatch):
    """A Chinese notebook's setup cell prints the description in Chinese (issue 29)."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh_CN")
    text = dev.describe_device("cpu")
    assert "没有找到 GPU" in text and "更改运行时类型" in text and "No GPU" not in text
