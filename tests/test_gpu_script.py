"""The GPU run made ready on a CPU: benchmarks/device_gather.py (what the device needs, carried),
benchmarks/device_run.sh and gpu_results.sh (the budgeted pieces) and benchmarks/decode_context.py."""

import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import torch

from course_runtime import data

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import decode_context  # noqa: E402
import device_gather  # noqa: E402

SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


def _device_python() -> str | None:
    """A Python of the device's version on this machine (pyenv's builds count), or None."""
    candidates = [*map(str, sorted(pathlib.Path.home().glob(f".pyenv/versions/{device_gather.DEVICE_PYTHON}.*/bin/python3"))),
                  shutil.which(f"python{device_gather.DEVICE_PYTHON}")]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "import venv"], capture_output=True).returncode == 0:
            return candidate
    return None


def _fake_nanogpt(folder: pathlib.Path) -> pathlib.Path:
    """A folder laid out like a nanoGPT checkout, with the data files a real one accumulates."""
    for name in device_gather.NANOGPT_NEEDED + ("sample.py", "config/train_gpt2.py"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"# {name}\n", encoding="utf-8")
    for name in ("data/shakespeare_char/train.bin", "data/shakespeare_char/input.txt", "out/ckpt.pt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"\0" * 1000)
    return folder


def _gather(tmp_path, *args):
    return subprocess.run([sys.executable, "benchmarks/device_gather.py", "--dest", str(tmp_path / "bundle"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_gather_refuses_a_file_that_is_not_tiny_shakespeare_and_a_folder_that_is_not_nanogpt(tmp_path):
    wrong = tmp_path / "tiny.txt"
    wrong.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n", encoding="utf-8")
    done = _gather(tmp_path, "--nanogpt", str(_fake_nanogpt(tmp_path / "nanoGPT")), "--data", str(wrong))
    assert done.returncode == 2 and "SHA-256 is not Tiny Shakespeare's" in done.stderr
    assert not (tmp_path / "bundle").exists()
    if SHAKESPEARE.is_file():
        (tmp_path / "empty").mkdir()
        done = _gather(tmp_path, "--nanogpt", str(tmp_path / "empty"), "--data", str(SHAKESPEARE))
        assert done.returncode != 0 and "not a nanoGPT checkout (missing train.py" in done.stderr


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The real gathering (PyPI through pip) into a temporary folder, from a stand-in nanoGPT checkout."""
    if not SHAKESPEARE.is_file():
        pytest.skip("needs ../shared/data/tinyshakespeare.txt")
    folder = tmp_path_factory.mktemp("gather")
    done = _gather(folder, "--nanogpt", str(_fake_nanogpt(folder / "nanoGPT")), "--data", str(SHAKESPEARE))
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "bundle"


@pytest.mark.slow
def test_gathered_bundle_covers_what_the_device_lacks_and_fits_the_device(bundle, tmp_path):
    """Every module the notebook run imports that the device's image lacks comes in a wheel, the wheels'
    requirements are closed, nanoGPT travels as source only, the data as it was."""
    wheels = tmp_path / "wheels"
    shutil.copytree(bundle / "wheels", wheels)
    requirements = (wheels / "requirements.txt").read_text(encoding="utf-8").split()
    assert requirements == [f"{name}=={importlib.metadata.version(name)}" for name in
                            ("nbformat", "nbclient", "ipykernel", "ipywidgets")]
    assert device_gather.closure_problems(wheels, requirements) == []
    # Independently of the wheels' own lists: the distribution that provides each imported module here
    # (this venv's metadata) has a wheel for the device, in the version installed here.
    provided_by = importlib.metadata.packages_distributions()
    carried = {re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower(): path.name.split("-")[1]
               for path in wheels.glob("*.whl")}
    for module in device_gather.RUN_IMPORTS:
        distribution = provided_by[module][0]
        key = re.sub(r"[-_.]+", "-", distribution).lower()
        assert carried.get(key) == importlib.metadata.version(distribution), (module, distribution)
    # The check can fail: without traitlets the set is no longer closed, and says so.
    next(wheels.glob("traitlets-*.whl")).unlink()
    problems = device_gather.closure_problems(wheels, requirements)
    assert any(p.startswith("traitlets") and "no wheel" in p for p in problems)
    assert "no wheel installs the module traitlets" in problems
    copied = sorted(p.relative_to(bundle / "nanoGPT").as_posix() for p in (bundle / "nanoGPT").rglob("*") if p.is_file())
    assert copied == sorted(device_gather.NANOGPT_NEEDED + ("sample.py", "config/train_gpt2.py"))
    assert (bundle / "data" / "tinyshakespeare.txt").read_bytes() == SHAKESPEARE.read_bytes()
    manifest = (bundle / "MANIFEST.md").read_text(encoding="utf-8")
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert "with the checkout" in manifest and size < 40 * 2**20


@pytest.mark.slow
@pytest.mark.skipif(_device_python() is None, reason=f"no Python {device_gather.DEVICE_PYTHON} on this machine")
def test_gathered_wheels_install_offline_on_the_device_python_and_run_a_notebook(bundle, tmp_path):
    """Installed as device_run.sh installs them (offline, nothing else there), they run a notebook in a kernel."""
    wheels, venv = bundle / "wheels", tmp_path / "device-python"
    subprocess.run([_device_python(), "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir",
                    "--no-compile", "--find-links", str(wheels), "-r", str(wheels / "requirements.txt")],
                   check=True, timeout=300)
    code = ("import nbformat, nbclient\n"
            "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("
            "'import sys, ipywidgets; print(sys.version_info[:2], ipywidgets.__version__)')])\n"
            "nbclient.NotebookClient(nb, timeout=120, kernel_name='python3').execute()\n"
            "print(nb.cells[0].outputs[0]['text'])")
    ran = subprocess.run([str(venv / "bin/python"), "-c", code], capture_output=True, text=True, timeout=300)
    version = tuple(int(part) for part in device_gather.DEVICE_PYTHON.split("."))
    assert ran.stdout.strip() == f"{version} {importlib.metadata.version('ipywidgets')}", ran.stderr[-2000:]


def _run_device_script(tmp_path, budget, **env):
    """benchmarks/device_run.sh on this CPU in its smoke settings; returns (process, results, out)."""
    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    (results / "earlier-run.md").write_text("committed before this run\n", encoding="utf-8")
    settings = {**os.environ, "OUT": str(out), "RESULTS": str(results), "PY": sys.executable, "PRESET": "tiny",
                "DECODE_ARGS": "--quick --no-hugging-face", "NOTEBOOKS": "0", "DATA": "offline",
                "BUNDLE": str(tmp_path / "no-bundle"), "NANOGPT": str(_fake_nanogpt(tmp_path / "nanoGPT")),
                "CUDA_VISIBLE_DEVICES": "", **env}
    done = subprocess.run(["bash", "benchmarks/device_run.sh", str(budget)], cwd=ROOT, env=settings,
                          capture_output=True, text=True, timeout=600)
    return done, results, out


def _rows(summary: pathlib.Path) -> dict:
    """The pieces table of a gpu-run-*.md: piece -> (outcome, seconds, files)."""
    rows = {}
    for line in summary.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("piece", "---"):
            rows[cells[0]] = (cells[1], cells[3], cells[4])
    return rows


@pytest.mark.slow
def test_device_run_on_cpu_runs_what_fits_skips_the_rest_and_says_why(tmp_path):
    """A budget of 139 s: decoding (expected 100 s on the H100) starts; the Shakespeare pair (expected
    290 s) would end past the budget whatever the time, so it is skipped, in the table, not silently;
    the preset (its estimate set to 1 s) still fits after it and runs."""
    text = tmp_path / "text.txt"
    text.write_text(data.offline_corpus(), encoding="utf-8")
    done, results, out = _run_device_script(tmp_path, 139, PIECES="decode step shakespeare preset notebooks",
                                            DATA=str(text), ESTIMATES="preset=1", TRAIN_ARGS="--max-iters 4")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summaries = list(results.glob("gpu-run-*.md"))
    assert len(summaries) == 1
    rows = _rows(summaries[0])
    assert list(rows) == ["decode", "step", "shakespeare", "preset", "notebooks"]
    assert rows["decode"][0] == "done" and rows["preset"][0] == "done"
    assert rows["step"][0] == "skipped: needs a CUDA GPU (nanoGPT's bench.py)"
    assert re.fullmatch(r"skipped: would end near \d+ s, past the budget of 139 s", rows["shakespeare"][0])
    assert rows["notebooks"][0] == "skipped: NOTEBOOKS=0"
    decode = json.loads(next(results.glob("decode-context-64-*.json")).read_text(encoding="utf-8"))
    ours = decode["ours"]
    assert ours["identical"] and ours["compiled_identical"] and decode["hugging_face"] is None
    assert ours["uncached_tokens_per_s"] == pytest.approx(48 / ours["uncached_s"])
    table = next(results.glob("decode-context-64-*.md")).read_text(encoding="utf-8")
    assert f"**{ours['compiled_tokens_per_s'] / ours['uncached_tokens_per_s']:.1f}x**" in table
    assert rows["decode"][2] == " ".join(f"`{p.name}`" for p in sorted(results.glob("decode-context-*")))
    summary = json.loads(next(results.glob("train-tiny-*.json")).read_text(encoding="utf-8"))
    log = next(results.glob("train-tiny-*.log")).read_text(encoding="utf-8")
    assert f"final val_loss {summary['final_val_loss']:.4f}" in log and summary["config"]["max_iters"] == 4
    # What comes back from the device: the table, the log and the files this run wrote, not older ones.
    assert sorted(p.name for p in out.iterdir()) == sorted(["device-run.log", "gpu-results.tar.gz", summaries[0].name])
    with tarfile.open(out / "gpu-results.tar.gz") as packed:
        assert sorted(packed.getnames()) == sorted(p.name for p in results.iterdir() if p.name != "earlier-run.md")
    assert "finished after" in (out / "device-run.log").read_text(encoding="utf-8")
    assert "no-bundle/wheels (run benchmarks/device_gather.py first)" in done.stdout


@pytest.mark.slow
def test_a_piece_still_running_at_the_budget_is_stopped_and_what_finished_comes_back(tmp_path):
    """A preset that would train for hours, started within a 20 s budget, is stopped at it; the pieces
    after it are skipped; the table and the partial log are in OUT."""
    done, results, out = _run_device_script(tmp_path, 20, PIECES="preset decode", ESTIMATES="preset=1",
                                            TRAIN_ARGS="--max-iters 100000000")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = _rows(next(results.glob("gpu-run-*.md")))
    assert rows["preset"][0] == "stopped at the budget of 20 s" and int(rows["preset"][1]) <= 20 + 10
    assert re.fullmatch(r"skipped: would end near \d+ s, past the budget of 20 s", rows["decode"][0])
    assert not list(results.glob("train-tiny-*.json"))
    with tarfile.open(out / "gpu-results.tar.gz") as packed:
        assert sorted(packed.getnames()) == sorted(p.name for p in results.iterdir() if p.name != "earlier-run.md")
        assert any(name.startswith("train-tiny-") and name.endswith(".log") for name in packed.getnames())


@pytest.mark.parametrize("setting, message", [({"ESTIMATES": "decode=fast"}, "piece=seconds pairs, got 'decode=fast'"),
                                              ({"BUDGET": "9m"}, "the budget is whole seconds (0: none), got '9m'")])
def test_estimates_and_the_budget_are_whole_seconds(tmp_path, setting, message):
    done = subprocess.run(["bash", "benchmarks/gpu_results.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **setting, "RESULTS": str(tmp_path / "r")})
    assert done.returncode == 2 and message in done.stderr and not (tmp_path / "r").exists()


def test_an_unknown_piece_stops_the_run_before_anything_runs(tmp_path):
    done = subprocess.run(["bash", "benchmarks/gpu_results.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PIECES": "decode nanogpt", "RESULTS": str(tmp_path / "r")})
    assert done.returncode == 2 and "unknown piece 'nanogpt'" in done.stderr and not (tmp_path / "r").exists()


def test_decode_table_states_the_ratio_and_whether_the_target_is_met():
    ours = {"n_params": 30e6, "uncached_tokens_per_s": 100.0, "cached_tokens_per_s": 150.0, "speedup": 1.5,
            "identical": True, "compiled_tokens_per_s": 1234.0, "compiled_identical": True,
            "bandwidth_limit_tokens_per_s": None}
    result = {"device": "GPU", "torch": "2", "date": "today", "load_average": None, "quick": False,
              "sizes": decode_context.FULL, "compile_backend": "inductor", "ours": ours,
              "hugging_face": {"cached_tokens_per_s": 50.0, "uncached_tokens_per_s": 80.0, "identical": True}}
    text = decode_context.format_markdown(result)
    assert "**12.3x** the uncached" in text and "met here" in text and "not met" not in text
    assert "| Hugging Face GPT-2, same shape, no cache | 80.0 | 0.80 |" in text
    ours["compiled_tokens_per_s"] = 950.0
    assert "**9.5x**" in decode_context.format_markdown(result) and "not met here" in decode_context.format_markdown(result)


def test_a_decode_step_that_does_not_compile_still_leaves_the_eager_rows_and_says_why():
    result = decode_context.measure(quick=True, device=torch.device("cpu"), hugging_face=False,
                                    backend="no-such-backend")
    assert result["compile_error"] and "no-such-backend" in result["compile_error"]
    assert "compiled_tokens_per_s" not in result["ours"] and result["ours"]["identical"]
    text = decode_context.format_markdown(result)
    assert "| this project, KV cache, eager |" in text and "compiled fixed-shape step (" not in text
    assert "Compiling the decode step (no-such-backend) failed" in text and "not measured" in text
