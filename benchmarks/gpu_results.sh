#!/usr/bin/env bash
# Every number the course reports for a GPU, in one command, recorded under benchmarks/results/:
#   1. the benchmark tables (attention, KV cache, a GPT-2-small training step with its MFU);
#   2. the capstone's GPU preset on Tiny Shakespeare (validation loss, tokens/s, MFU, wall time);
#   3. every chapter and solution notebook executed on this device;
#   4. with NANOGPT=path/to/a/nanoGPT/checkout, nanoGPT side by side: its training step (bench.py) and
#      its Shakespeare-char run against ours, each pair back to back (benchmarks/vs_nanogpt.py).
#
#   DATA=path/to/tinyshakespeare.txt bash benchmarks/gpu_results.sh     # or `make gpu-results DATA=...`
#
# DATA defaults to the checked download (needs the internet). PRESET and BENCH_ARGS exist so the
# script can be smoke-tested on a CPU:
#   PRESET=tiny BENCH_ARGS=--quick NOTEBOOKS=0 RESULTS=/tmp/r DATA=offline bash benchmarks/gpu_results.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PRESET=${PRESET:-shakespeare-gpu}
DATA=${DATA:-}
BENCH_ARGS=${BENCH_ARGS:-}
NOTEBOOKS=${NOTEBOOKS:-1}
NANOGPT=${NANOGPT:-}
RESULTS=${RESULTS:-benchmarks/results}

$PY -m transformer_core bench $BENCH_ARGS --out "$RESULTS"

slug=$($PY -c "from transformer_core.bench import device_slug; print(device_slug())")
run_dir=runs/$PRESET
$PY -m transformer_core train --preset "$PRESET" ${DATA:+--data "$DATA"} --out "$run_dir" --quiet \
    | tee "$RESULTS/train-$PRESET-$slug.log"
cp "$run_dir/summary.json" "$RESULTS/train-$PRESET-$slug.json"

if [ "$NOTEBOOKS" = 1 ]; then
    $PY benchmarks/notebook_times.py --out "$RESULTS"
fi
if [ -n "$NANOGPT" ]; then
    $PY benchmarks/vs_nanogpt.py --nanogpt "$NANOGPT" --recipe step --out "$RESULTS"
    if [ -n "$DATA" ]; then      # nanoGPT's recipe reads a file: the comparison needs DATA
        $PY benchmarks/vs_nanogpt.py --nanogpt "$NANOGPT" --recipe gpu --data "$DATA" --out "$RESULTS"
    fi
fi
echo "recorded under $RESULTS/ (device: $slug)"
