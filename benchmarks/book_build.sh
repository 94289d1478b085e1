#!/usr/bin/env bash
# The book build against the bare work it must do, side by side on one machine:
#   1. the bare execution: every English chapter executed once, one after the other, with
#      `jupyter nbconvert --to notebook --execute` in the same venv (the work a build cannot avoid);
#   2. a clean `make book` (both execution caches, Sphinx's environments and the built sites removed from
#      _build/, as in a fresh clone; the fetched site assets kept).
# Prints each step's seconds, the ratio and the load average before and after each; `make book` prints
# its own table of where the time went. Takes about twice the bare execution: run it on a quiet machine.
#
#   bash benchmarks/book_build.sh 2>&1 | tee /tmp/book-build.log
#
# `make book`'s prerequisites `exercises` (regenerates exercises/) and the venv's install are not remade
# (make -o), so the measurement leaves the tracked files as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
load() { echo "load average $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"; }

echo "== bare execution of the English chapters (nbconvert), $(load)"
bare_out=$(mktemp -d)
bare_start=$(now)
for notebook in book/[0-9][0-9]-*.ipynb; do
    start=$(now)
    "$VENV/bin/jupyter" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
        --output-dir "$bare_out" "$notebook" >/dev/null 2>&1
    echo "bare $(basename "$notebook" .ipynb): $(since "$start") s"
done
bare=$(since "$bare_start")
rm -rf "$bare_out"
echo "bare execution: $bare s, $(load)"

echo "== clean make book, $(load)"
rm -rf _build/.jupyter_cache* _build/.doctrees _build/html _build/jupyter_execute _build/zh-* \
    _build/book-inputs.sha256
book_start=$(now)
make -o exercises -o "$VENV/.installed" book
book=$(since "$book_start")
echo "make book: $book s, $(load)"
python3 -c "import sys; print(f'make book / bare execution = {float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$book" "$bare"
