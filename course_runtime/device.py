"""Picking the device and the mixed-precision dtype, describing the hardware, seeding.

Every course notebook starts with::

    from course_runtime.device import describe_device, pick_device
    device = pick_device()
    print(describe_device(device))

``pick_device`` prefers a CUDA GPU, then Apple's MPS, then the CPU. Set the environment
variable ``TRANSFORMER_CORE_DEVICE`` (e.g. ``cpu``) to override the automatic choice without
editing a notebook.

``peak_flops`` looks up the dense (no structured sparsity) peak throughput of known GPUs, so that
training can report model FLOPs utilisation (MFU) against the GPU it actually ran on.
"""

from __future__ import annotations

import os
import platform
import random
import re

import torch

__all__ = [
    "pick_device",
    "autocast_dtype",
    "cpu_has_native_bfloat16",
    "describe_device",
    "peak_flops",
    "lookup_peak_flops",
    "peak_memory_bandwidth",
    "lookup_peak_memory_bandwidth",
    "seed_everything",
    "PEAK_TFLOPS",
    "PEAK_MEMORY_BANDWIDTH_GBPS",
]

_COLAB_HINT = ("No GPU found, so the code runs on the CPU (fine for every exercise; the capstone "
               "trains faster on a GPU). On Colab: Runtime > Change runtime type > GPU (e.g. T4), "
               "then run this cell again.")

# The same description for a Chinese notebook (course_runtime.language): the setup cell prints it.
_ZH = {
    "memory": "{} 显存",
    "device_cuda": "设备：{device} = {name}（计算能力 {major}.{minor}，{memory}）",
    "dtype": "数据类型：{}",
    "amp": "混合精度 {}",
    "no_amp": "float32（不用 autocast）",
    "peak_unknown": "峰值 FLOP/s：未知的 GPU，因此不报告 MFU（可在 course_runtime.device.PEAK_TFLOPS 中补上它）",
    "peak": "峰值 FLOP/s（{dtype}，稠密）：{tflops:.1f} TFLOP/s",
    "device_mps": "设备：mps = 通过 Metal 使用的 Apple GPU{memory}",
    "mps_memory": "，可用内存 {}",
    "device_cpu": "设备：cpu = {name}，{cores} 个逻辑核心，torch 使用 {threads} 个线程{memory}",
    "cpu_memory": "，内存 {}",
    "colab": ("没有找到 GPU，代码在 CPU 上运行（所有练习都够用；只有综合项目在 GPU 上训练得更快）。"
              "在 Colab 上：依次点“代码执行程序 > 更改运行时类型”，选一种 GPU（例如 T4），再重新运行本单元格。"),
}


def _chinese() -> bool:
    from course_runtime.language import CHINESE, get_language

    return get_language() == CHINESE


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def pick_device(prefer: str | torch.device | None = None) -> torch.device:
    """Choose where tensors and models should live.

    Args:
        prefer: ``None`` or ``"auto"`` picks the best available device in the order
            CUDA > MPS > CPU (the environment variable ``TRANSFORMER_CORE_DEVICE``, when set,
            replaces ``None``). Any other value (``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"cpu"`` or a
            ``torch.device``) asks for exactly that device.

    Returns:
        The chosen ``torch.device`` (``cuda`` without an index becomes ``cuda:<current>``).

    Raises:
        ValueError: if ``prefer`` is not a device name.
        RuntimeError: if the requested device is not available here; the message says how to get
            one or how to fall back to the CPU.

    Example:
        >>> pick_device("cpu")
        device(type='cpu')
    """
    if prefer is None:
        prefer = os.environ.get("TRANSFORMER_CORE_DEVICE") or None
    if prefer is None or (isinstance(prefer, str) and prefer.strip().lower() == "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(prefer.strip().lower() if isinstance(prefer, str) else prefer)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"pick_device(prefer={prefer!r}): not a device name. Use None/'auto', "
                         f"'cuda', 'cuda:0', 'mps' or 'cpu'.") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"pick_device(prefer={prefer!r}): CUDA is not available (torch "
                f"{torch.__version__}, torch.cuda.is_available() is False). On Colab choose "
                f"Runtime > Change runtime type > GPU; elsewhere install a CUDA build of PyTorch, "
                f"or call pick_device() / pick_device('cpu') to run on the CPU.")
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise RuntimeError(f"pick_device(prefer={prefer!r}): there are only "
                               f"{torch.cuda.device_count()} CUDA device(s), numbered from 0.")
        return torch.device("cuda", index)
    if device.type == "mps" and not _mps_available():
        raise RuntimeError(f"pick_device(prefer={prefer!r}): Apple MPS is not available on this "
                           f"machine (it needs Apple silicon and a recent macOS). Use "
                           f"pick_device() or pick_device('cpu').")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"pick_device(prefer={prefer!r}): the course supports 'cuda', 'mps' and "
                         f"'cpu', not {device.type!r}.")
    return device


def autocast_dtype(device: str | torch.device) -> torch.dtype | None:
    """The dtype to use with ``torch.autocast`` on ``device``, or ``None`` for plain float32.

    bfloat16 on CUDA GPUs with compute capability >= 8.0 (Ampere and newer: A100, L4, H100,
    RTX 30xx/40xx); float16 on older CUDA GPUs (T4, V100), which then need a ``GradScaler`` when
    training; ``None`` on CPU and MPS, where autocast rarely pays off for small models.

    Args:
        device: a ``torch.device`` or device string.

    Example:
        >>> autocast_dtype("cpu") is None
        True
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


def cpu_has_native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX tiles).

    :func:`autocast_dtype` stays ``None`` on every CPU, because a CPU without these instructions
    emulates bfloat16 and runs slower than in float32; where they exist, autocasting a training step
    to bfloat16 can pay (the ``shakespeare-cpu`` preset does; see ``benchmarks/results/training.md``).
    Reads PyTorch's own CPU probes, and answers False where a build has none.
    """
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def _human_bytes(n: float) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while n >= 1024 and len(units) > 1:
        n /= 1024
        units.pop(0)
    return f"{n:.1f} {units[0]}"


def _cpu_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def describe_device(device: str | torch.device | None = None) -> str:
    """A one-paragraph, human-readable description of ``device`` for a notebook's setup cell.

    Says the device's name, its memory, the mixed-precision dtype the library will use and the
    peak throughput used for MFU when known. On the CPU it also tells the learner how to get a
    GPU on Colab.

    Args:
        device: defaults to ``pick_device()``.

    Returns:
        A string (several lines); this function prints nothing.
    """
    device = pick_device(device)
    amp = autocast_dtype(device)
    if _chinese():
        return _describe_device_zh(device, amp)
    amp_text = f"mixed precision {str(amp).removeprefix('torch.')}" if amp else "float32 (no autocast)"
    lines = [f"torch {torch.__version__}"]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        lines.append(f"device: {device} = {props.name} (compute capability {props.major}.{props.minor}, "
                     f"{_human_bytes(props.total_memory)} memory)")
        lines.append(f"dtype: {amp_text}")
        peak = peak_flops(device, amp)
        if peak is None:
            lines.append("peak FLOP/s: unknown GPU, so MFU will not be reported "
                         "(add it to course_runtime.device.PEAK_TFLOPS)")
        else:
            lines.append(f"peak FLOP/s ({str(amp).removeprefix('torch.')}, dense): {peak / 1e12:.1f} TFLOP/s")
    elif device.type == "mps":
        memory = ""
        recommended = getattr(getattr(torch, "mps", None), "recommended_max_memory", None)
        if recommended is not None:
            memory = f", {_human_bytes(recommended())} usable memory"
        lines.append(f"device: mps = Apple GPU via Metal{memory}")
        lines.append(f"dtype: {amp_text}")
    else:
        name = platform.processor() or platform.machine() or "unknown CPU"
        memory = _cpu_memory_bytes()
        memory_text = f", {_human_bytes(memory)} RAM" if memory else ""
        lines.append(f"device: cpu = {name}, {os.cpu_count()} logical cores, "
                     f"{torch.get_num_threads()} torch threads{memory_text}")
        lines.append(f"dtype: {amp_text}")
        lines.append(_COLAB_HINT)
    return "\n".join(lines)


def _describe_device_zh(device: torch.device, amp: torch.dtype | None) -> str:
    """:func:`describe_device` in Chinese (the language in force is Chinese)."""
    amp_text = _ZH["amp"].format(str(amp).removeprefix("torch.")) if amp else _ZH["no_amp"]
    lines = [f"torch {torch.__version__}"]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        lines.append(_ZH["device_cuda"].format(device=device, name=props.name, major=props.major, minor=props.minor,
                                               memory=_ZH["memory"].format(_human_bytes(props.total_memory))))
        lines.append(_ZH["dtype"].format(amp_text))
        peak = peak_flops(device, amp)
        lines.append(_ZH["peak_unknown"] if peak is None else
                     _ZH["peak"].format(dtype=str(amp).removeprefix("torch."), tflops=peak / 1e12))
    elif device.type == "mps":
        recommended = getattr(getattr(torch, "mps", None), "recommended_max_memory", None)
        memory = _ZH["mps_memory"].format(_human_bytes(recommended())) if recommended is not None else ""
        lines.append(_ZH["device_mps"].format(memory=memory))
        lines.append(_ZH["dtype"].format(amp_text))
    else:
        name = platform.processor() or platform.machine() or "未知 CPU"
        memory = _cpu_memory_bytes()
        lines.append(_ZH["device_cpu"].format(name=name, cores=os.cpu_count(), threads=torch.get_num_threads(),
                                              memory=_ZH["cpu_memory"].format(_human_bytes(memory)) if memory else ""))
        lines.append(_ZH["dtype"].format(amp_text))
        lines.append(_ZH["colab"])
    return "\n".join(lines)


# Dense peak throughput in TFLOP/s (1e12 FLOP/s) per dtype, without 2:4 structured sparsity.
# "tf32" is the tensor-core rate for float32 matmuls when TF32 is allowed; "fp32" is the plain
# CUDA-core rate. Sources (vendor datasheets and architecture whitepapers; where a datasheet
# gives only the "with sparsity" figure we halve it):
#   A100 (SXM4 and PCIe, 40/80 GB): NVIDIA A100 Tensor Core GPU datasheet (2021).
#   H100 SXM5 / PCIe / NVL:         NVIDIA H100 Tensor Core GPU datasheet (2023/2024).
#   H200 SXM / NVL, GH200:          NVIDIA H200 Tensor Core GPU datasheet (2024), GH200 datasheet.
#   L4:                             NVIDIA L4 Tensor Core GPU datasheet (2023).
#   L40, L40S:                      NVIDIA L40 and L40S datasheets (2023).
#   A10:                            NVIDIA A10 Tensor Core GPU datasheet (2021).
#   A10G:                           NVIDIA publishes no A10G datasheet, so it is left out rather than
#                                   given the A10's figures: no peak, no MFU (the A10 pattern needs a
#                                   word boundary and does not match "A10G").
#   T4:                             NVIDIA T4 Tensor Core GPU datasheet (2019); Turing has no bf16/tf32.
#   V100 SXM2 / PCIe:               NVIDIA V100 Tensor Core GPU datasheet (2020); no bf16/tf32.
#   RTX 4090:                       NVIDIA Ada Lovelace (AD102) architecture whitepaper, FP16/BF16
#                                   tensor with FP32 accumulate (what autocast uses).
#   RTX 3090, RTX 3080:             NVIDIA Ampere GA102 architecture whitepaper, FP16/BF16 tensor
#                                   with FP32 accumulate.
# Order matters: the first pattern that matches the CUDA device name wins.
PEAK_TFLOPS: list[tuple[str, str, dict[str, float]]] = [
    # (regex on the lower-cased device name, canonical name, {dtype: dense TFLOP/s})
    (r"gh200", "GH200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"h200.*nvl", "H200 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    (r"h200", "H200 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"h100.*pcie", "H100 PCIe", {"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.2}),
    (r"h100.*nvl", "H100 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    (r"h100", "H100 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"a100", "A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    (r"l40s", "L40S", {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    (r"l40", "L40", {"bf16": 181.05, "fp16": 181.05, "tf32": 90.5, "fp32": 90.5}),
    (r"\bl4\b", "L4", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    (r"\ba10\b", "A10", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}),
    (r"\bt4\b", "T4", {"fp16": 65.0, "fp32": 8.1}),
    (r"v100.*pcie", "V100 PCIe", {"fp16": 112.0, "fp32": 14.0}),
    (r"v100", "V100 SXM2", {"fp16": 125.0, "fp32": 15.7}),
    (r"rtx 4090", "RTX 4090", {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6}),
    (r"rtx 3090", "RTX 3090", {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6}),
    (r"rtx 3080", "RTX 3080", {"bf16": 59.5, "fp16": 59.5, "tf32": 29.8, "fp32": 29.8}),
]

_DTYPE_KEYS = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def lookup_peak_flops(gpu_name: str, dtype: torch.dtype = torch.bfloat16, *,
                      tf32: bool = False) -> float | None:
    """Dense peak FLOP/s of a GPU, looked up by its name in ``PEAK_TFLOPS``.

    Args:
        gpu_name: a CUDA device name such as ``"NVIDIA A100-SXM4-80GB"`` or ``"Tesla T4"``.
        dtype: ``torch.bfloat16``, ``torch.float16`` or ``torch.float32``.
        tf32: for float32, use the TF32 tensor-core rate (when ``torch.backends.cuda.matmul.allow_tf32``
            is on) instead of the plain float32 rate.

    Returns:
        FLOP/s (e.g. ``312e12`` for an A100 in bf16), or ``None`` when the GPU is not in the table
        or does not support ``dtype`` in hardware (bf16 on a T4).

    Example:
        >>> lookup_peak_flops("NVIDIA A100-SXM4-40GB", torch.bfloat16)
        312000000000000.0
    """
    if dtype not in _DTYPE_KEYS:
        raise ValueError(f"lookup_peak_flops: dtype must be one of {list(_DTYPE_KEYS)}, got {dtype}")
    key = _DTYPE_KEYS[dtype]
    if key == "fp32" and tf32:
        key = "tf32"
    name = gpu_name.lower()
    for pattern, _, table in PEAK_TFLOPS:
        if re.search(pattern, name):
            value = table.get(key)
            return None if value is None else value * 1e12
    return None


def peak_flops(device: str | torch.device | None = None,
               dtype: torch.dtype | None = None) -> float | None:
    """Dense peak FLOP/s of ``device`` for matmuls in ``dtype``; ``None`` when unknown.

    Args:
        device: defaults to ``pick_device()``. CPUs and MPS return ``None`` (their peak depends on
            clock, vector units and thread count; no honest table exists).
        dtype: defaults to ``autocast_dtype(device)`` or float32 when there is none. For float32 the
            TF32 rate is used when ``torch.backends.cuda.matmul.allow_tf32`` is on.

    Returns:
        FLOP/s, the denominator of model FLOPs utilisation (MFU).
    """
    device = pick_device(device)
    if device.type != "cuda":
        return None
    if dtype is None:
        dtype = autocast_dtype(device) or torch.float32
    name = torch.cuda.get_device_name(device)
    return lookup_peak_flops(name, dtype, tf32=bool(torch.backends.cuda.matmul.allow_tf32))


# Peak memory bandwidth (GB/s) of GPUs' own memory (HBM on data-centre GPUs, GDDR6 on the T4, L4 and
# A10), from NVIDIA's datasheets:
#   H100 SXM5 3,350; H100 PCIe 2,000; H100 NVL (94 GB) 3,900 (NVIDIA H100 Tensor Core GPU datasheet, 2023/2024)
#   H200 SXM and H200 NVL 4,800 (NVIDIA H200 Tensor Core GPU datasheet, 2024)
#   GH200 Grace Hopper Superchip: 96 GB HBM3 4,000; 144 GB HBM3e 4,900 (NVIDIA GH200 datasheet, 2024)
#   A100 80GB SXM4 2,039 and PCIe 1,935; A100 40GB 1,555 (NVIDIA A100 datasheet, 2021)
#   L4 300 (2023); T4 320 (2019); V100 SXM2 900 (2020); A10 600 (2021)
# Patterns are tried in order on the lower-cased CUDA device name; the first match wins, so the GH200
# rows come before "h200" (which is a substring of "gh200") and the H100 variants before plain "h100"
# (the SXM5's name, "NVIDIA H100 80GB HBM3", names no form factor). A GH200 whose name does not say
# HBM3e (or its 144 GB) gets the HBM3 figure, the lower bound.
PEAK_MEMORY_BANDWIDTH_GBPS: list[tuple[str, str, float]] = [
    (r"gh200.*(hbm3e|144 ?gb?\b)", "GH200 144GB HBM3e", 4900.0),
    (r"gh200", "GH200 96GB HBM3", 4000.0),
    (r"h200", "H200", 4800.0),
    (r"h100.*pcie", "H100 PCIe", 2000.0),
    (r"h100.*nvl", "H100 NVL", 3900.0),
    (r"h100", "H100 SXM5", 3350.0),
    (r"a100.*80gb.*pcie|a100.*pcie.*80gb", "A100 80GB PCIe", 1935.0),
    (r"a100.*80gb", "A100 80GB SXM4", 2039.0),
    (r"a100", "A100 40GB", 1555.0),
    (r"\bl4\b", "L4", 300.0),
    (r"\bt4\b", "T4", 320.0),
    (r"v100", "V100", 900.0),
    (r"\ba10\b", "A10", 600.0),
]


def peak_memory_bandwidth(device: str | torch.device | None = None) -> float | None:
    """Peak memory bandwidth of a CUDA device in bytes/s, looked up by name; ``None`` when unknown
    (CPUs, MPS, GPUs not in :data:`PEAK_MEMORY_BANDWIDTH_GBPS`).

    A decode step at batch 1 must read every weight (and the filled KV cache) once, so
    ``bandwidth / bytes per token`` bounds its tokens per second from above.
    """
    device = pick_device(device)
    if device.type != "cuda":
        return None
    return lookup_peak_memory_bandwidth(torch.cuda.get_device_name(device))


def lookup_peak_memory_bandwidth(gpu_name: str) -> float | None:
    """Peak memory bandwidth in bytes/s of the GPU called ``gpu_name`` (e.g. ``"Tesla T4"``), or None.

    Example:
        >>> lookup_peak_memory_bandwidth("NVIDIA H100 80GB HBM3")
        3350000000000.0
    """
    name = gpu_name.lower()
    for pattern, _, gbps in PEAK_MEMORY_BANDWIDTH_GBPS:
        if re.search(pattern, name):
            return gbps * 1e9
    return None


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy (when installed) and PyTorch (CPU and all GPUs).

    Args:
        seed: any non-negative integer.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed_everything: seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
