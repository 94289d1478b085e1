"""Data-parallel training with torchrun: two CPU processes (gloo) train like one process with the same
global batch, and only rank 0 reports and writes."""

import re
import subprocess
import sys

import pytest

from course_runtime import data

LOSS_LINE = re.compile(r"^step\s+(\d+): train loss ([\d.]+), val loss ([\d.]+)$", re.M)


TORCHRUN_2 = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")


def _arguments(folder, out, extra=()) -> list[str]:
    return ["train", "--preset", "tiny", "--data", str(folder / "text.txt"), "--out", str(folder / out),
            "--max-iters", "30", "--device", "cpu", "--quiet", "--threads", "1", *extra]


def _run(folder, *launcher, out, extra=()):
    command = [sys.executable, *launcher, "-m", "transformer_core", *_arguments(folder, out, extra)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _train(folder, *launcher, out, extra=()):
    done = _run(folder, *launcher, out=out, extra=extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_process_with_the_same_global_batch(tmp_path, capsys):
    """The tiny preset has one micro-batch per step; under two processes the default becomes two
    (one each), which one process matches with --grad-accum 2. The one process is this one (the same
    command line, without starting Python and importing torch a third time)."""
    from transformer_core.__main__ import main

    (tmp_path / "text.txt").write_text(data.offline_corpus()[:6000], encoding="utf-8")
    assert main(_arguments(tmp_path, "one", ("--grad-accum", "2"))) == 0
    single = capsys.readouterr().out
    parallel = _train(tmp_path, *TORCHRUN_2, out="two")
    assert "grad-accum: 2 micro-batches per step, 1 in each of 2 processes (the preset's 1" in parallel
    one, two = LOSS_LINE.findall(single), LOSS_LINE.findall(parallel)
    assert [step for step, *_ in one] == [step for step, *_ in two] == ["0", "20", "30"]
    for (step, train_a, val_a), (_, train_b, val_b) in zip(one, two):
        assert abs(float(train_a) - float(train_b)) < 2e-4 and abs(float(val_a) - float(val_b)) < 2e-4, step
    assert parallel.count("final val_loss") == 1, "only rank 0 reports"
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["ckpt.pt", "last.pt", "summary.json"]


def test_a_global_batch_that_does_not_split_over_the_processes_is_refused(monkeypatch):
    import torch

    from transformer_core import distributed, train

    monkeypatch.setattr(distributed, "current", lambda: distributed.Ranks(rank=0, local_rank=0, world_size=2))
    config = train.PRESETS["tiny"].replace(grad_accum_steps=3, max_iters=1)
    model = train.build_model(config, 10)
    ids = torch.randint(0, 10, (500,))
    with pytest.raises(ValueError, match="grad_accum_steps=3 must be a multiple of the 2 processes"):
        train.train(model, ids, ids, config, device="cpu", progress=False)


@pytest.mark.slow
def test_bad_input_under_torchrun_is_reported_once_with_its_own_flag(tmp_path):
    (tmp_path / "text.txt").write_text(data.offline_corpus()[:6000], encoding="utf-8")
    done = _run(tmp_path, *TORCHRUN_2, out="run", extra=("--grad-accum", "3"))
    assert done.returncode != 0
    message = "error: --grad-accum 3: must be a multiple of the 2 processes"
    assert done.stderr.count(message) == 1, done.stderr[-3000:]
    assert "e.g. --grad-accum 4" in done.stderr and "error: --resume" not in done.stderr
