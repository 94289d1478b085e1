#!/usr/bin/env bash
# Every number the course reports for a GPU, in one command, recorded under benchmarks/results/.
# The pieces run in this order (PIECES chooses and orders them), the rows issue 33 asks for first:
#   decode       decoding to a 1,024-token context: cached, uncached, compiled fixed-shape steps, and
#                Hugging Face's GPT-2 of the same shape (benchmarks/decode_context.py);
#   step         a GPT-2-small training step, nanoGPT's bench.py and ours (vs_nanogpt.py --recipe step;
#                needs NANOGPT and CUDA);
#   shakespeare  nanoGPT's Shakespeare-char recipe and our shakespeare-gpu preset back to back
#                (vs_nanogpt.py --recipe gpu; needs NANOGPT and a DATA file);
#   bench        the benchmark tables (attention, KV cache, a GPT-2-small training step with its MFU);
#   preset       the capstone's GPU preset alone (validation loss, tokens/s, MFU, wall time, as JSON);
#   notebooks    every chapter and solution notebook executed on this device, one piece each.
#
#   DATA=path/to/tinyshakespeare.txt NANOGPT=path/to/nanoGPT bash benchmarks/gpu_results.sh
#
# BUDGET=S (seconds, counted from START, a Unix time, default now; 0 = no budget) makes the run fit a
# time limit: a piece starts only if its expected length (ESTIMATE below, measured on an H100) ends
# within the budget, else it is recorded as skipped with the reason; a started piece is stopped at the
# budget. Every piece's outcome is a row of results/gpu-run-<device>.md, written after each piece, and
# with OUT=folder the files this run wrote are packed into OUT/gpu-results.tar.gz after each piece too
# (benchmarks/device_run.sh, the command for a lent device, sets all of these).
# DATA defaults to the checked download (needs the internet). PRESET, TRAIN_ARGS (more options of
# `transformer_core train`), BENCH_ARGS and DECODE_ARGS exist so that the script can be smoke-tested on a CPU:
#   PRESET=tiny BENCH_ARGS=--quick DECODE_ARGS=--quick NOTEBOOKS=0 RESULTS=/tmp/r DATA=offline bash benchmarks/gpu_results.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # the scripts import the course from this checkout
PY=${PY:-.venv/bin/python}
PRESET=${PRESET:-shakespeare-gpu}
DATA=${DATA:-}
BENCH_ARGS=${BENCH_ARGS:-}
DECODE_ARGS=${DECODE_ARGS:-}
TRAIN_ARGS=${TRAIN_ARGS:-}
NOTEBOOKS=${NOTEBOOKS:-1}
NANOGPT=${NANOGPT:-}
ROUNDS=${ROUNDS:-1}
RESULTS=${RESULTS:-benchmarks/results}
BUDGET=${BUDGET:-0}
START=${START:-$(date +%s)}
OUT=${OUT:-}
PIECES=${PIECES:-decode step shakespeare bench preset notebooks}
export PY PRESET DATA RESULTS TRAIN_ARGS

# Seconds each piece took on the H100 of 2026-11-23 (../shared/gpu-results), rounded up; the
# decode and step pieces, never run there whole, are estimated from the parts that were.
# ESTIMATES="decode=80 step=150" overrides them (after a first run on another GPU, say).
declare -A ESTIMATE=([decode]=100 [step]=130 [shakespeare]=290 [bench]=120 [preset]=140 [notebook]=40
                     [book/10-capstone-gpt.ipynb]=180)
for pair in ${ESTIMATES:-}; do
    if [[ ! $pair =~ ^[^=]+=[0-9]+$ ]]; then
        echo "gpu_results.sh: ESTIMATES takes piece=seconds pairs, got '$pair'" >&2
        exit 2
    fi
    ESTIMATE[${pair%%=*}]=${pair#*=}
done

if [[ ! $BUDGET =~ ^[0-9]+$ ]]; then
    echo "gpu_results.sh: the budget is whole seconds (0: none), got '$BUDGET'" >&2
    exit 2
fi
for name in $PIECES; do
    case $name in
    decode|step|shakespeare|bench|preset|notebooks) ;;
    *) echo "gpu_results.sh: unknown piece '$name' in PIECES (decode step shakespeare bench preset notebooks)" >&2
       exit 2 ;;
    esac
done
mkdir -p "$RESULTS"
read -r slug has_cuda < <($PY -c "import torch; from transformer_core.bench import device_slug
print(device_slug(), int(torch.cuda.is_available()))")
[ -n "$slug" ] || exit 1
summary="$RESULTS/gpu-run-$slug.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
touch "$work/run-stamp"
: >"$work/rows"

write_summary() {   # the table of pieces so far, to results/ and, with OUT, everything this run wrote
    {
        echo "# Pieces of \`benchmarks/gpu_results.sh\` on $slug"
        echo
        echo "Started $(date -u -d "@$START" '+%Y-%m-%d %H:%M UTC'); budget: $([ "$BUDGET" -gt 0 ] && echo "$BUDGET s" || echo none); PIECES=\`$PIECES\`."
        if [ -n "${MANIFEST:-}" ] && [ -f "$MANIFEST" ]; then
            echo
            sed 's/^#/##/' "$MANIFEST"
        fi
        echo
        echo "| piece | outcome | started at (s) | seconds | files written |"
        echo "|---|---|---:|---:|---|"
        cat "$work/rows"
    } >"$summary"
    if [ -n "$OUT" ]; then
        mkdir -p "$OUT"
        cp "$summary" "$OUT/"
        (cd "$RESULTS" && find . -maxdepth 1 -type f -newer "$work/run-stamp" -printf '%P\n' | sort \
            | tar czf "$OUT/gpu-results.tar.gz" -T -)
    fi
}

record() {   # record NAME OUTCOME STARTED SECONDS FILES
    printf '| %s | %s | %s | %s | %s |\n' "$@" >>"$work/rows"
    echo "== $1: $2" >&2
    write_summary
}

skip() {   # skip NAME REASON
    record "$1" "skipped: $2" "$(( $(date +%s) - START ))" "" ""
}

piece() {   # piece NAME ESTIMATE COMMAND...: run COMMAND unless it would end past the budget
    local name=$1 estimate=$2
    shift 2
    local at=$(( $(date +%s) - START )) limit=()
    if [ "$BUDGET" -gt 0 ] && [ $((at + estimate)) -gt "$BUDGET" ]; then
        record "$name" "skipped: would end near $((at + estimate)) s, past the budget of $BUDGET s" "$at" "" ""
        return
    fi
    [ "$BUDGET" -gt 0 ] && limit=(timeout -k 10 $((BUDGET - at)))
    echo "== $name: started at $at s (expected about $estimate s)" >&2
    touch "$work/piece-stamp"
    "${limit[@]}" "$@"
    local rc=$? outcome=done
    if [ $rc != 0 ] && [ "$BUDGET" -gt 0 ] && [ $(( $(date +%s) - START )) -ge "$BUDGET" ]; then
        outcome="stopped at the budget of $BUDGET s"
    elif [ $rc != 0 ]; then
        outcome="failed (exit $rc)"
    fi
    local files
    files=$(cd "$RESULTS" && find . -maxdepth 1 -type f -newer "$work/piece-stamp" ! -name "gpu-run-*" \
        -printf '%P\n' | LC_ALL=C sort | sed 's/.*/`&`/' | paste -sd' ' -)
    record "$name" "$outcome" "$at" "$(( $(date +%s) - START - at ))" "$files"
}

preset_run() {   # train the preset (its checkpoint in a temporary folder), keep its log and summary under results/
    local run_dir=$work/run-$PRESET
    $PY -m transformer_core train --preset "$PRESET" ${DATA:+--data "$DATA"} --out "$run_dir" --quiet $TRAIN_ARGS \
        | tee "$RESULTS/train-$PRESET-$slug.log" && cp "$run_dir/summary.json" "$RESULTS/train-$PRESET-$slug.json"
}

notebook_run() {   # notebook_run PATH TABLE: execute one notebook, add its row to TABLE
    local rows="$work/notebook-$RANDOM"
    $PY benchmarks/notebook_times.py --only "$1" --out "$rows" || return
    grep -h '^| \(book\|solutions\)/' "$rows"/notebook-times-*.md >>"$2"
}
export -f preset_run notebook_run
export slug work
write_summary

for name in $PIECES; do
    case $name in
    decode)
        piece decode "${ESTIMATE[decode]}" $PY benchmarks/decode_context.py $DECODE_ARGS --out "$RESULTS" ;;
    step)
        if [ -z "$NANOGPT" ]; then skip step "NANOGPT (a nanoGPT checkout) not given"
        elif [ "$has_cuda" != 1 ]; then skip step "needs a CUDA GPU (nanoGPT's bench.py)"
        else piece step "${ESTIMATE[step]}" $PY benchmarks/vs_nanogpt.py --nanogpt "$NANOGPT" --recipe step --out "$RESULTS"
        fi ;;
    shakespeare)
        if [ -z "$NANOGPT" ]; then skip shakespeare "NANOGPT (a nanoGPT checkout) not given"
        elif [ ! -f "$DATA" ]; then skip shakespeare "nanoGPT's recipe reads a file: DATA must be Tiny Shakespeare's path"
        else piece shakespeare "${ESTIMATE[shakespeare]}" $PY benchmarks/vs_nanogpt.py --nanogpt "$NANOGPT" \
                 --recipe gpu --rounds "$ROUNDS" --data "$DATA" --out "$RESULTS"
        fi ;;
    bench)
        piece bench "${ESTIMATE[bench]}" $PY -m transformer_core bench $BENCH_ARGS --out "$RESULTS" ;;
    preset)
        piece preset "${ESTIMATE[preset]}" bash -c preset_run ;;
    notebooks)
        if [ "$NOTEBOOKS" != 1 ]; then skip notebooks "NOTEBOOKS=$NOTEBOOKS"; continue; fi
        if ! $PY -c "import nbclient, ipykernel, ipywidgets" 2>/dev/null; then
            skip notebooks "nbclient, ipykernel or ipywidgets cannot be imported"; continue
        fi
        table="$RESULTS/notebook-times-$slug.md"
        printf '%s\n\n%s\n%s\n' "Notebook execution times on $slug, one fresh kernel each (benchmarks/gpu_results.sh)." \
            "| notebook | seconds | status |" "|---|---:|---|" >"$table"
        for notebook in book/[0-9][0-9]-*.ipynb solutions/*/*.ipynb; do
            piece "$notebook" "${ESTIMATE[$notebook]:-${ESTIMATE[notebook]}}" bash -c 'notebook_run "$0" "$1"' \
                "$notebook" "$table"
        done ;;
    esac
done
echo "recorded under $RESULTS/ (device: $slug); pieces: $summary"
