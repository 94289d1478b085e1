"""The command line (`python -m transformer_core ...`) and the benchmark module."""

import contextlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

from course_runtime import data
from transformer_core import bench
from transformer_core.complexity import flops_per_token
from transformer_core.models import TransformerConfig
from transformer_core.__main__ import main


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train the tiny preset once through the command line's entry point; returns (stdout, ckpt)."""
    folder = tmp_path_factory.mktemp("cli")
    text_file = folder / "text.txt"
    text_file.write_text(data.offline_corpus()[:4000], encoding="utf-8")
    out = folder / "run"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(["train", "--preset", "tiny", "--data", str(text_file), "--out", str(out),
                       "--max-iters", "30", "--device", "cpu", "--quiet"])
    assert status == 0
    return stdout.getvalue(), out / "ckpt.pt"


def test_python_dash_m_entry_point_runs():
    """`python -m transformer_core` works as a program: a bad preset exits with status 2."""
    proc = subprocess.run([sys.executable, "-m", "transformer_core", "train", "--preset", "huge"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_train_prints_final_val_loss_last(trained):
    stdout, checkpoint = trained
    last = stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"final val_loss \d+\.\d+", last), f"unexpected last line: {last!r}"
    assert float(last.split()[-1]) < 5.0
    assert checkpoint.is_file()


def test_train_writes_a_summary_with_the_whole_split_loss(trained):
    stdout, checkpoint = trained
    summary = json.loads((checkpoint.parent / "summary.json").read_text())
    assert summary["preset"] == "tiny" and summary["config"]["max_iters"] == 30
    assert f"final val_loss {summary['final_val_loss']:.4f}" in stdout
    assert re.search(rf"whole validation split \([\d,]+ tokens, in windows of 32\): {summary['val_loss_whole_split']:.4f}",
                     stdout)
    assert "iter_losses" not in summary and summary["tokens_per_second"] > 0


def _generate(capsys, checkpoint, *extra):
    status = main(["generate", "--checkpoint", str(checkpoint), "--prompt", "The ",
                   "--max-new-tokens", "24", "--device", "cpu", *extra])
    assert status == 0
    return capsys.readouterr().out


def test_generate_greedy_is_identical_with_and_without_cache(trained, capsys):
    _, checkpoint = trained
    cached = _generate(capsys, checkpoint, "--temperature", "0")
    uncached = _generate(capsys, checkpoint, "--temperature", "0", "--no-cache")
    assert cached.startswith("The ") and len(cached.rstrip("\n")) == 4 + 24
    assert cached == uncached


def test_generate_compile_with_the_default_500_tokens_works_and_says_what_runs_compiled(trained, capsys,
                                                                                      monkeypatch):
    """The default --max-new-tokens (500) is longer than every preset's context: compiled decoding fills
    the context, then slides uncompiled like the eager path, and says so in one note."""
    _, checkpoint = trained
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **options: real_compile(  # no C compiler needed
        fn, **{**options, "backend": "aot_eager", "mode": None}))
    argv = ["generate", "--checkpoint", str(checkpoint), "--prompt", "The ", "--device", "cpu", "--temperature", "0"]
    assert main(argv + ["--compile"]) == 0
    compiled = capsys.readouterr()
    assert main(argv) == 0
    assert compiled.out == capsys.readouterr().out and len(compiled.out.rstrip("\n")) == 4 + 500
    note = compiled.err.strip()
    assert note.startswith("note: generate(compile=...)") and "ask for at most 29 new tokens" in note
    assert len(note.splitlines()) == 1 and "Traceback" not in note and "Warning" not in note


def test_generate_sampling_is_reproducible_with_a_seed(trained, capsys):
    _, checkpoint = trained
    first = _generate(capsys, checkpoint, "--top-k", "5", "--top-p", "0.9", "--seed", "3")
    again = _generate(capsys, checkpoint, "--top-k", "5", "--top-p", "0.9", "--seed", "3")
    assert first == again


@pytest.mark.parametrize("argv, message", [
    ([], "required"),
    (["train"], "--preset"),
    (["train", "--preset", "huge"], "invalid choice"),
    (["train", "--preset", "tiny", "--max-iters", "0"], "at least 1"),
    (["train", "--preset", "tiny", "--data", "/no/such/file.txt"], "no such file"),
    (["train", "--preset", "tiny", "--data", "offline", "--device", "tpu"], "--device"),
    (["generate", "--checkpoint", "/no/such/ckpt.pt"], "no such file"),
    (["generate", "--checkpoint", "x.pt", "--top-p", "1.5"], "(0, 1]"),
    (["generate", "--checkpoint", "x.pt", "--temperature", "-1"], ">= 0"),
    (["train", "--preset", "tiny", "--seed", "-1"], "from 0 to 2**63 - 1"),
    (["train", "--preset", "tiny", "--seed", str(2**64)], "from 0 to 2**63 - 1"),
    (["generate", "--checkpoint", "x.pt", "--seed", str(10**30)], "from 0 to 2**63 - 1"),
])
def test_bad_arguments_exit_with_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def _not_checkpoints(folder):
    """Files a user might pass as --checkpoint by mistake, by name."""
    import pickle

    files = {"text": b"hello, I am a text file\n", "empty": b"", "random bytes": bytes(range(256)) * 3,
             "a pickled module": pickle.dumps(torch.nn.Linear(2, 2))}
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f"{name.replace(' ', '-')}.pt"
        paths[name].write_bytes(content)
    torch.save({"weights": torch.zeros(2)}, folder / "a-tensor-dict.pt")
    paths["a dict of tensors"] = folder / "a-tensor-dict.pt"
    return paths


def test_a_file_that_is_not_a_checkpoint_gets_a_message_and_exit_2(tmp_path, capsys):
    for name, path in _not_checkpoints(tmp_path).items():
        with pytest.raises(SystemExit) as info:
            main(["generate", "--checkpoint", str(path), "--device", "cpu"])
        err = capsys.readouterr().err
        assert info.value.code == 2, name
        assert "is not a transformer_core checkpoint" in err and "Traceback" not in err, (name, err)


def test_an_empty_data_file_gets_a_message_and_exit_2(tmp_path, capsys):
    for content in ("", "  \n\n"):
        data = tmp_path / "empty.txt"
        data.write_text(content, encoding="utf-8")
        with pytest.raises(SystemExit) as info:
            main(["train", "--preset", "tiny", "--data", str(data), "--out", str(tmp_path / "run")])
        assert info.value.code == 2 and "the file is empty" in capsys.readouterr().err
    assert not (tmp_path / "run").exists(), "nothing is written for a run that cannot start"


def test_train_refuses_to_overwrite_an_earlier_run_and_resumes_it(tmp_path, capsys):
    text_file = tmp_path / "text.txt"
    text_file.write_text(data.offline_corpus()[:4000], encoding="utf-8")
    run = ["train", "--preset", "tiny", "--data", str(text_file), "--out", str(tmp_path / "run"),
           "--max-iters", "20", "--device", "cpu", "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(run) == 0
    before = (tmp_path / "run" / "ckpt.pt").read_bytes()
    with pytest.raises(SystemExit) as info:
        main(run)
    assert info.value.code == 2 and "holds an earlier run" in capsys.readouterr().err
    assert (tmp_path / "run" / "ckpt.pt").read_bytes() == before, "the earlier checkpoint is untouched"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(run + ["--resume", "--max-iters", "20"]) == 0       # already at its last step
    assert "final val_loss" in out.getvalue() and out.getvalue().count("step     20:") == 1
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(run + ["--overwrite"]) == 0
    with pytest.raises(SystemExit) as info:
        main(["train", "--preset", "tiny", "--data", str(text_file), "--out", str(tmp_path / "new"), "--resume"])
    assert info.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_generate_rejects_unknown_prompt_characters(trained, capsys):
    _, checkpoint = trained
    with pytest.raises(SystemExit) as info:
        main(["generate", "--checkpoint", str(checkpoint), "--prompt", "\u2603", "--device", "cpu"])
    assert info.value.code == 2 and "not in the vocabulary" in capsys.readouterr().err


def _empty_results():
    return {"device": "cpu", "device_type": "cpu", "torch": torch.__version__, "threads": 1, "quick": True,
            "date": "today", "load_average": 0.5, "attention": []}


def test_bench_pieces_on_small_sizes(tmp_path):
    rows = bench.bench_attention((16, 32), batch_size=1, n_heads=2, head_dim=8, device="cpu",
                                 min_run_time=0.01, progress=False)
    assert [r["seq_len"] for r in rows] == [16, 32]
    assert all(r["naive_ms"] > 0 and r["fused_ms"] > 0 and r["max_abs_diff"] < 1e-4 for r in rows)
    gen = bench.bench_generation(6, prompt_len=4, repeats=1, device="cpu", vocab_size=50, d_model=16,
                                 n_heads=2, n_layers=1, progress=False, compiled="aot_eager", batch_sizes=(1, 3))
    assert gen["identical"] and gen["speedup"] > 0 and gen["compiled_identical"]
    assert gen["compiled_tokens_per_s"] > 0 and gen["bandwidth_limit_tokens_per_s"] is None     # CPU: unknown
    assert [row["batch_size"] for row in gen["batched"]] == [1, 3] and all(r["tokens_per_s"] > 0 for r in gen["batched"])
    assert "| 3 |" in bench.format_markdown({**_empty_results(), "generation": gen})
    shape = dict(n_layers=1, n_heads=2, d_model=16, block_size=8, batch_size=2)
    step = bench.bench_train_step(shape, steps=4, warmup_steps=1, device="cpu", vocab_size=50,
                                  progress=False)
    model_config = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, max_len=8)
    assert step["flops_per_token"] == flops_per_token(model_config, 8, training=True)
    assert step["tokens_per_s"] * step["ms_per_step"] / 1e3 == pytest.approx(2 * 8)
    assert step["last_loss"] < step["first_loss"]          # the step trains on its repeated batch
    assert step["mfu"] is None and step["peak_tflops"] is None and not step["compiled"]
    results = {"device": bench.device_name("cpu"), "device_type": "cpu", "torch": torch.__version__,
               "threads": 1, "quick": True, "date": "today", "load_average": 0.5,
               "attention": rows, "generation": gen, "train_step": step}
    json_path, md_path = bench.save_results(results, tmp_path)
    assert json_path.name.endswith("-quick.json") and json.loads(json_path.read_text())["quick"]
    table = md_path.read_text()
    assert "| 32 | 1 |" in table and "identical tokens: True" in table
    assert "1 layers x 16, 2 heads, context 8, batch 2" in table and "| n/a | n/a | n/a |" in table


def test_bench_train_step_rejects_unknown_shapes():
    with pytest.raises(ValueError, match="unknown shape 'gpt3'"):
        bench.bench_train_step("gpt3", device="cpu")


def test_naive_attention_matches_fused():
    q, k, v = torch.randn(3, 2, 2, 5, 4).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(bench.naive_causal_attention(q, k, v), expected)


def test_bench_train_step_falls_back_to_eager_when_compile_fails(monkeypatch):
    """A machine without a working torch.compile (no C compiler, no Triton) still gets timings."""
    def broken_compile(model, *args, **kwargs):
        def run(*inputs, **options):
            raise RuntimeError("no C compiler found\nmore details")
        return run
    monkeypatch.setattr(torch, "compile", broken_compile)
    shape = dict(n_layers=1, n_heads=2, d_model=16, block_size=8, batch_size=2)
    with pytest.warns(RuntimeWarning, match="torch.compile failed"):
        step = bench.bench_train_step(shape, steps=2, warmup_steps=1, device="cpu", vocab_size=50,
                                      compile=True, progress=False)
    assert not step["compiled"] and step["compile_error"] == "RuntimeError: no C compiler found"
    assert step["tokens_per_s"] > 0 and step["last_loss"] < step["first_loss"]
    assert "torch.compile failed (RuntimeError: no C compiler found)" in "\n".join(bench._train_step_markdown(step))


def test_bench_train_step_without_clipping_and_biases_reports_both_mfu_formulas():
    shape = dict(n_layers=1, n_heads=2, d_model=16, block_size=8, batch_size=2, bias=False)
    step = bench.bench_train_step(shape, steps=2, warmup_steps=1, device="cpu", vocab_size=50, grad_clip=0.0,
                                  progress=False)
    # No biases: the attention and feed-forward matrices, three LayerNorm gains, the tied table, the positions.
    assert step["n_params"] == 4 * 16 * 16 + 2 * 16 * 64 + 3 * 16 + 50 * 16 + 8 * 16
    assert step["grad_clip"] == 0.0 and step["nanogpt_mfu"] is None and step["last_loss"] < step["first_loss"]
    table = "\n".join(bench._train_step_markdown(step))
    assert "(forward, backward, fused AdamW)" in table and "(no biases)" in table and "nanoGPT's formula" in table


def test_vs_nanogpt_step_recipe_reads_nanogpt_bench_and_rescales_its_mfu(tmp_path, monkeypatch):
    """The step recipe runs a nanoGPT checkout's bench.py; here a stand-in prints nanoGPT's closing line."""
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    import vs_nanogpt
    (tmp_path / "bench.py").write_text("print('time per iteration: 36.4000ms, MFU: 123.40%')\n")
    monkeypatch.setattr("course_runtime.device.peak_flops", lambda device, dtype: 989e12)
    shape = dict(n_layers=1, n_heads=2, d_model=16, block_size=8, batch_size=2, bias=False)
    rows = "\n".join(vs_nanogpt._step_rows(tmp_path, torch.device("cpu"), shape=shape, compile=False))
    assert "| 36.4 | 38.9% |" in rows                       # 123.4% of 312 TFLOP/s is 38.9% of 989
    assert "no clipping | " in rows and "clipping to 1.0 | " in rows and "peak 989 TFLOP/s" in rows
    (tmp_path / "bench.py").write_text("print('nothing useful')\n")
    with pytest.raises(SystemExit, match="printed no 'time per iteration"):
        vs_nanogpt._step_rows(tmp_path, torch.device("cpu"), shape=shape, compile=False)


def _text_file(folder, text):
    path = folder / "text.txt"
    path.write_text(text, encoding="utf-8")
    return path


def _exit_2_with_one_line(argv, capsys) -> str:
    """Run the command line, expecting status 2 and a message line without a traceback; returns it."""
    with pytest.raises(SystemExit) as info:
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def test_folders_and_files_in_the_wrong_place_are_named_as_such(tmp_path, capsys, monkeypatch):
    text_file = _text_file(tmp_path, data.offline_corpus()[:4000])
    message = _exit_2_with_one_line(["train", "--preset", "tiny", "--data", str(tmp_path), "--device", "cpu"], capsys)
    assert "is a folder, not a file" in message
    message = _exit_2_with_one_line(["generate", "--checkpoint", str(tmp_path), "--device", "cpu"], capsys)
    assert "is a folder, not a checkpoint file" in message
    (tmp_path / "ckpt.pt").write_bytes(b"")
    message = _exit_2_with_one_line(["generate", "--checkpoint", str(tmp_path), "--device", "cpu"], capsys)
    assert f"did you mean {tmp_path / 'ckpt.pt'}?" in message
    for out in (text_file, text_file / "run"):
        message = _exit_2_with_one_line(["train", "--preset", "tiny", "--data", str(text_file), "--out", str(out),
                                         "--max-iters", "2", "--device", "cpu", "--quiet"], capsys)
        assert message.endswith("not a folder; give a folder (it is created if missing)") and "--out" in message
    monkeypatch.setattr(bench, "run_benchmarks", lambda **options: pytest.fail("benchmarked before checking --out"))
    message = _exit_2_with_one_line(["bench", "--quick", "--device", "cpu", "--out", str(text_file)], capsys)
    assert "--out" in message and "is a file, not a folder" in message


def test_resuming_on_other_data_or_from_a_damaged_state_stops_with_one_line(tmp_path, capsys):
    text = data.offline_corpus()[:4000]
    run = ["train", "--preset", "tiny", "--out", str(tmp_path / "run"), "--max-iters", "20", "--device", "cpu",
           "--quiet", "--threads", "1"]
    (tmp_path / "a").mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(run + ["--data", str(_text_file(tmp_path / "a", text))]) == 0
    state_file = tmp_path / "run" / "last.pt"
    intact = state_file.read_bytes()
    others = {"same characters, other text": (text[2000:] + text[:2000], "train data: 3,600 tokens"),
              "more characters": (text + "Z@#", "vocabulary: 53 -> 56 characters (new characters '#@Z')")}
    for name, (other, expected) in others.items():
        (tmp_path / name).mkdir()
        message = _exit_2_with_one_line(run + ["--resume", "--data", str(_text_file(tmp_path / name, other))], capsys)
        assert message.startswith("python -m transformer_core train: error: --resume: ") and \
            "was trained on other data" in message and expected in message, (name, message)
        assert "resume with the data of that run, or start a new run on this data (--overwrite" in message
    same_text = run + ["--resume", "--data", str(tmp_path / "a" / "text.txt")]
    state = torch.load(state_file, weights_only=True)
    damages = {"a key removed": lambda s: s.pop("optimizer"),
               "a weight removed": lambda s: s["model"].pop("embeddings.token.weight"),
               "a weight reshaped": lambda s: s["model"].__setitem__("lm_head.weight", torch.zeros(3, 32)),
               "the generators removed": lambda s: s.__setitem__("train_generators", []),
               "the step edited": lambda s: s.__setitem__("step", "x"),
               "the optimizer's groups removed": lambda s: s["optimizer"].__setitem__("param_groups", [])}
    for name, damage in damages.items():
        broken = {key: (dict(value) if isinstance(value, dict) else value) for key, value in state.items()}
        broken["optimizer"] = dict(state["optimizer"])
        damage(broken)
        torch.save(broken, state_file)
        message = _exit_2_with_one_line(same_text, capsys)
        assert message.startswith("python -m transformer_core train: error: --resume: "), (name, message)
        assert "is damaged" in message or "holds a model of other sizes" in message, (name, message)
    state_file.write_bytes(intact[:len(intact) // 2])
    assert "is not a training state" in _exit_2_with_one_line(same_text, capsys)
    state_file.write_bytes(intact)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(same_text) == 0, "the intact state still resumes"


def test_generate_does_not_print_pytorchs_own_deprecation_warnings_as_notes(trained, capsys, monkeypatch):
    import warnings

    from transformer_core import generation

    _, checkpoint = trained
    real_generate = generation.generate

    def generate_like_inductor(*args, **kwargs):
        """torch.compile's inductor backend runs PyTorch's own `torch.jit.script_method` deprecation
        warning 14 times on a CPU; defining a ScriptModule runs the same one."""
        for _ in range(3):
            class Scripted(torch.jit.ScriptModule):
                @torch.jit.script_method
                def forward(self, x):
                    return x
        warnings.warn("a note of the library's own", UserWarning)
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(generation, "generate", generate_like_inductor)
    assert main(["generate", "--checkpoint", str(checkpoint), "--prompt", "The ", "--max-new-tokens", "4",
                 "--device", "cpu", "--temperature", "0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("The ")
    assert err.strip() == "note: a note of the library's own", err
