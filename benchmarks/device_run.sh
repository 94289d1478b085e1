#!/usr/bin/env bash
# The GPU measurements on a lent device machine, in one command that ends within its time limit:
#
#   bash benchmarks/device_run.sh [BUDGET_SECONDS]      # default 540: the device stops a command at 600 s
#
# It needs the folder benchmarks/device_gather.py makes (BUNDLE, default .device: the notebook
# packages' wheels, a nanoGPT source copy, Tiny Shakespeare), carried to the device. It installs the
# wheels offline into the image's python3, then runs benchmarks/gpu_results.sh with the budget, the
# issue's rows first: decoding to 1,024 tokens, the GPT-2-small training step and the Shakespeare
# recipe, each next to nanoGPT (and Hugging Face for decoding); then the benchmark tables, the preset
# alone and the notebooks, each only if its expected length still fits. What finished is written under
# benchmarks/results/ and, when the device's result folder OUT is set, packed into
# OUT/gpu-results.tar.gz after every piece, next to OUT/gpu-run-<device>.md (a row per piece: done,
# failed, stopped at the budget, or skipped and why) and OUT/device-run.log (all output).
# Every variable of gpu_results.sh passes through (PIECES, PY, RESULTS, ...); on a CPU, a smoke run:
#   OUT=/tmp/o PY=.venv/bin/python PRESET=tiny BENCH_ARGS=--quick DECODE_ARGS=--quick NOTEBOOKS=0 \
#     RESULTS=/tmp/r DATA=offline bash benchmarks/device_run.sh 120
set -uo pipefail
START=$(date +%s)
cd "$(dirname "$0")/.."
BUDGET=${1:-${BUDGET:-540}}
BUNDLE=${BUNDLE:-.device}
PY=${PY:-python3}
OUT=${OUT:-}
export PYTHONUNBUFFERED=1 START BUDGET PY OUT
export DATA=${DATA-$BUNDLE/data/tinyshakespeare.txt}
export NANOGPT=${NANOGPT-$BUNDLE/nanoGPT}
export MANIFEST=$BUNDLE/MANIFEST.md

log=/dev/null
if [ -n "$OUT" ]; then mkdir -p "$OUT" && log=$OUT/device-run.log; fi
{
    echo "device_run.sh: budget $BUDGET s; bundle $BUNDLE; python $($PY -c 'import sys; print(sys.version.split()[0])')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    if [ -f "$BUNDLE/wheels/requirements.txt" ]; then
        # Into the image's environment, from the carried wheels only; what the image already has is kept.
        $PY -m pip install --quiet --no-index --no-cache-dir --no-compile --find-links "$BUNDLE/wheels" \
            -r "$BUNDLE/wheels/requirements.txt" || echo "device_run.sh: the wheels did not install; the notebooks will be skipped"
    else
        echo "device_run.sh: no $BUNDLE/wheels (run benchmarks/device_gather.py first); the notebooks need them"
    fi
    [ -d "$NANOGPT" ] || { echo "device_run.sh: no nanoGPT at $NANOGPT"; NANOGPT=; }
    bash benchmarks/gpu_results.sh
    status=$?
    echo "device_run.sh: finished after $(( $(date +%s) - START )) s of the $BUDGET s budget (exit $status)"
    exit $status
} 2>&1 | tee "$log"
