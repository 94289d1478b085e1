"""transformer_core.train: schedule, presets, the loop on a synthetic task, FLOP estimate, checkpoints."""

import math

import pytest
import torch

from course_runtime import data
from transformer_core import train
from course_runtime.device import seed_everything

SCHEDULE = dict(max_lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=110)


def test_lr_warmup_is_linear_and_reaches_max():
    assert train.lr_at(0, **SCHEDULE) == pytest.approx(1e-4)
    assert train.lr_at(4, **SCHEDULE) == pytest.approx(5e-4)
    assert train.lr_at(9, **SCHEDULE) == pytest.approx(1e-3)


def test_lr_cosine_closed_form_and_endpoints():
    assert train.lr_at(10, **SCHEDULE) == pytest.approx(1e-3)                 # start of the decay
    assert train.lr_at(60, **SCHEDULE) == pytest.approx(5.5e-4)               # halfway: the mean
    quarter = 1e-4 + 0.5 * (1 + math.cos(math.pi * 0.25)) * 9e-4
    assert train.lr_at(35, **SCHEDULE) == pytest.approx(quarter)
    assert train.lr_at(110, **SCHEDULE) == pytest.approx(1e-4)
    assert train.lr_at(10_000, **SCHEDULE) == pytest.approx(1e-4)
    values = [train.lr_at(s, **SCHEDULE) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(values, values[1:])), "the decay must be monotone"


def test_lr_without_warmup_and_bad_arguments():
    assert train.lr_at(0, max_lr=1.0, min_lr=0.0, warmup_steps=0, total_steps=10) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="step"):
        train.lr_at(-1, **SCHEDULE)
    with pytest.raises(ValueError, match="warmup_steps"):
        train.lr_at(0, max_lr=1.0, min_lr=0.0, warmup_steps=20, total_steps=10)


def test_presets_follow_the_recipes():
    cpu = train.PRESETS["shakespeare-cpu"]
    assert (cpu.n_layers, cpu.n_heads, cpu.d_model, cpu.block_size, cpu.batch_size, cpu.max_iters) == \
        (4, 4, 128, 64, 12, 2000)
    assert (cpu.dropout, cpu.learning_rate, cpu.min_lr, cpu.eval_interval, cpu.eval_iters, cpu.grad_clip) == \
        (0.0, 1e-3, 1e-4, 250, 20, 1.0)
    gpu = train.PRESETS["shakespeare-gpu"]
    assert (gpu.n_layers, gpu.n_heads, gpu.d_model, gpu.block_size, gpu.batch_size, gpu.max_iters) == \
        (6, 6, 384, 256, 64, 5000)
    assert gpu.dropout == 0.2 and gpu.dtype == "auto" and gpu.model_options == {"bias": False}
    gpu_model = train.build_model(gpu, vocab_size=65)
    L, d, V = gpu.n_layers, gpu.d_model, 65                 # without biases: 12 L d^2 in the blocks,
    expected = 12 * L * d * d + V * d + (2 * L + 1) * d      # the tied table, 2L + 1 LayerNorm gains
    position_table = gpu.block_size * d                     # nanoGPT's "10.65M" leaves it out
    assert sum(p.numel() for p in gpu_model.parameters()) - position_table == expected == 10_646_784
    assert "tiny" in train.PRESETS
    with pytest.raises(ValueError, match="divisible"):
        train.TrainConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="no field"):
        cpu.replace(layers=3)


def _reverse_batches(length=6, vocab=8):
    def batch(batch_size, generator):
        return data.lm_batch(*data.reverse_task(batch_size, length, vocab, generator=generator),
                             sep_token_id=vocab)
    return batch


def test_training_on_reverse_task_lowers_the_loss():
    config = train.PRESETS["tiny"].replace(block_size=12, batch_size=32, max_iters=80, eval_interval=40,
                                           eval_iters=2, learning_rate=3e-3, warmup_iters=5)
    seed_everything(0)
    model = train.build_model(config, vocab_size=9)
    result = train.train(model, _reverse_batches(), _reverse_batches(), config, device="cpu", progress=False)
    assert result.history["step"] == [0, 40, 80]
    first, last = result.history["val_loss"][0], result.history["val_loss"][-1]
    assert last < first - 0.3, f"validation loss did not drop enough: {first:.3f} -> {last:.3f}"
    assert len(result.iter_losses) == 80
    assert result.tokens_per_second > 0 and result.mfu is None and result.dtype == "float32"
    assert result.final_val_loss == last and result.best_val_loss <= last


def test_bfloat16_autocast_trains_like_float32():
    """The mixed-precision path GPUs take (autocast to bf16), run on the CPU: same recipe, loss
    falls about as far as in float32, and the result says which dtype ran."""
    config = train.PRESETS["tiny"].replace(block_size=12, batch_size=32, max_iters=60, eval_interval=30,
                                           eval_iters=2, learning_rate=3e-3, warmup_iters=5)
    results = {}
    for dtype in ("float32", "bfloat16"):
        seed_everything(0)
        model = train.build_model(config.replace(dtype=dtype), vocab_size=9)
        results[dtype] = train.train(model, _reverse_batches(), _reverse_batches(), config.replace(dtype=dtype),
                                     device="cpu", progress=False)
    assert results["bfloat16"].dtype == "bfloat16" and results["float32"].dtype == "float32"
    for result in results.values():
        assert result.history["val_loss"][-1] < result.history["val_loss"][0] - 0.2
    assert abs(results["bfloat16"].final_val_loss - results["float32"].final_val_loss) < 0.15
    assert next(model.parameters()).dtype == torch.float32      # autocast keeps float32 master weights


def test_float16_needs_a_gpu():
    config = train.PRESETS["tiny"].replace(dtype="float16")
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        train.resolve_amp_dtype(config, torch.device("cpu"))

def test_callback_can_stop_training_early():
    config = train.PRESETS["tiny"].replace(max_iters=50, eval_interval=10)
    seed_everything(0)
    model = train.build_model(config, vocab_size=20)
    stream = torch.randint(20, (2000,), generator=torch.Generator().manual_seed(0))
    seen = []
    result = train.train(model, stream[:1800], stream[1800:], config, device="cpu", progress=False,
                         callback=lambda m: seen.append(m["step"]) or m["step"] >= 20)
    assert seen == [0, 10, 20] and result.stopped_early
    assert len(result.iter_losses) == 20


def test_reported_flops_follow_6n_plus_attention():
    config = train.PRESETS["tiny"].replace(max_iters=2, eval_interval=10)
    model = train.build_model(config, vocab_size=30)
    matrices = sum(p.numel() for name, p in model.named_parameters()
                   if p.dim() == 2 and "position" not in name)          # layers + tied head
    expected = 6 * matrices + 12 * config.n_layers * config.d_model * config.block_size
    stream = torch.randint(30, (500,), generator=torch.Generator().manual_seed(0))
    result = train.train(model, stream[:400], stream[400:], config, device="cpu", progress=False)
    assert result.flops_per_token == expected


def test_checkpoint_round_trip_gives_identical_logits(tmp_path):
    text = data.offline_corpus()[:5000]
    tok = data.CharTokenizer.from_text(text)
    train_ids, val_ids = data.train_val_split(tok.encode(text, as_tensor=True))
    config = train.PRESETS["tiny"].replace(max_iters=10, eval_interval=5, out_dir=str(tmp_path / "run"))
    seed_everything(0)
    model = train.build_model(config, tok.vocab_size)
    result = train.train(model, train_ids, val_ids, config, device="cpu", progress=False, tokenizer=tok)
    assert result.checkpoint_path is not None
    path = train.save_checkpoint(tmp_path / "final.pt", model, None, train_config=config, tokenizer=tok,
                                 step=10, val_loss=result.final_val_loss)
    loaded = train.load_checkpoint(path)
    assert loaded.tokenizer == tok and loaded.train_config == config and loaded.step == 10
    assert not loaded.model.training
    idx = torch.randint(tok.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(idx)[0], loaded.model(idx)[0])
    best = train.load_checkpoint(result.checkpoint_path)
    assert best.optimizer_state is not None and best.val_loss == pytest.approx(result.best_val_loss)
    assert not list((tmp_path / "run").glob("*.tmp")), "no temporary files may be left behind"


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="train"):
        train.load_checkpoint(tmp_path / "missing.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a transformer_core checkpoint"):
        train.load_checkpoint(tmp_path / "other.pt")


def test_sequential_batches_cover_every_token_once_and_evaluate_split_weights_by_windows():
    ids = torch.arange(23)
    batches = train.sequential_batches(ids, 5, batch_size=3)
    assert [tuple(x.shape) for x, _ in batches] == [(3, 5), (1, 5)]         # (23 - 1) // 5 = 4 windows
    x = torch.cat([x for x, _ in batches]).flatten()
    y = torch.cat([y for _, y in batches]).flatten()
    assert torch.equal(x, torch.arange(20)) and torch.equal(y, torch.arange(1, 21))
    with pytest.raises(ValueError, match="longer than block_size=5"):
        train.sequential_batches(torch.arange(5), 5)

    class Constant(torch.nn.Module):  # loss = mean target id: the weighting is checkable by hand
        def __init__(self):
            super().__init__()
            self.anchor = torch.nn.Parameter(torch.zeros(()))

        def forward(self, x, y):
            return None, y.float().mean()

    assert train.evaluate_split(Constant(), ids, 5, batch_size=3) == pytest.approx(11.5)  # 1 .. 22, the tail too


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_training_forward_compiles_to_one_graph(dropout):
    """torch.compile (used on GPUs) fuses a model only between graph breaks; a break in the
    training forward (a Python-side branch on tensor values, a .item(), an unsupported call)
    would split it and cost speed on every step. Dynamo's tracer runs on the CPU."""
    import torch._dynamo

    torch._dynamo.reset()
    config = train.PRESETS["tiny"].replace(dropout=dropout)
    model = train.build_model(config, vocab_size=20).train()
    x = torch.randint(20, (2, config.block_size))
    explanation = torch._dynamo.explain(model)(x, x)
    assert explanation.graph_break_count == 0, [str(b.reason) for b in explanation.break_reasons]
    assert explanation.graph_count == 1


def test_tokens_per_second_excludes_the_final_evaluation():
    """The final evaluation runs after the timed span; a slow one (here a callback sleeping 0.5 s)
    must not shrink the timed seconds, which once drove tokens/s to exactly 0."""
    import time as clock

    config = train.PRESETS["tiny"].replace(max_iters=30, eval_interval=100, eval_iters=1)
    stream = torch.randint(20, (3000,), generator=torch.Generator().manual_seed(0))
    for pause in (0.0, 0.5):
        seed_everything(0)
        model = train.build_model(config, vocab_size=20)
        slow_final_eval = (lambda m, pause=pause: clock.sleep(pause) if m["step"] == 30 else None)
        result = train.train(model, stream[:2500], stream[2500:], config, device="cpu", progress=False,
                             callback=slow_final_eval)
        assert result.tokens_per_second > 0
        timed_tokens = (30 - 3) * config.batch_size * config.block_size    # 3 warm-up steps skipped
        assert timed_tokens / result.tokens_per_second < result.wall_time_s - pause


def _resumable_run(folder, *, stop_at=None, resume=False, dropout=0.1):
    text = data.offline_corpus()[:6000]
    tokenizer = data.CharTokenizer.from_text(text)
    train_ids, val_ids = data.train_val_split(tokenizer.encode(text, as_tensor=True))
    config = train.PRESETS["tiny"].replace(max_iters=40, eval_interval=10, dropout=dropout, out_dir=str(folder),
                                           num_threads=1)
    seed_everything(config.seed)
    model = train.build_model(config, tokenizer.vocab_size)
    stop = (lambda info: info["step"] == stop_at) if stop_at is not None else None
    result = train.train(model, train_ids, val_ids, config, device="cpu", progress=False, callback=stop,
                         tokenizer=tokenizer, resume=folder / train.RESUME_FILE if resume else None)
    return model, result


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole_model, whole = _resumable_run(tmp_path / "whole")
    _, first_half = _resumable_run(tmp_path / "halves", stop_at=20)            # interrupted at step 20
    assert first_half.stopped_early and first_half.history["step"][-1] == 20
    seed_everything(12345)                         # a fresh process would start from another RNG state
    resumed_model, resumed = _resumable_run(tmp_path / "halves", resume=True)
    assert resumed.history["step"] == whole.history["step"] == [0, 10, 20, 30, 40]
    assert resumed.history["val_loss"] == whole.history["val_loss"]          # dropout 0.1: RNG restored too
    assert resumed.iter_losses == whole.iter_losses
    for (name, a), b in zip(resumed_model.state_dict().items(), whole_model.state_dict().values()):
        assert torch.equal(a, b), name


def test_resuming_with_another_recipe_is_refused(tmp_path):
    _resumable_run(tmp_path / "run", stop_at=10)
    text = data.offline_corpus()[:6000]
    tokenizer = data.CharTokenizer.from_text(text)
    ids = tokenizer.encode(text, as_tensor=True)
    config = train.PRESETS["tiny"].replace(max_iters=40, eval_interval=10, dropout=0.1, learning_rate=1e-2,
                                           out_dir=str(tmp_path / "run"))
    model = train.build_model(config, tokenizer.vocab_size)
    with pytest.raises(ValueError, match="learning_rate"):
        train.train(model, ids, ids, config, device="cpu", progress=False, resume=tmp_path / "run" / "last.pt")


def test_resuming_with_another_tokenizer_or_other_token_ids_is_refused(tmp_path):
    _resumable_run(tmp_path / "run", stop_at=10)
    text = data.offline_corpus()[:6000]
    config = train.PRESETS["tiny"].replace(max_iters=40, eval_interval=10, dropout=0.1, out_dir=str(tmp_path / "run"),
                                           num_threads=1)
    for other, expected in ((text[::-1], r"train data: 5,400 tokens \(sha256 \w+\) -> 5,400 tokens"),
                            (text + "\u00e9", r"vocabulary: \d+ -> \d+ characters \(new characters '\u00e9'\)")):
        tokenizer = data.CharTokenizer.from_text(other)
        train_ids, val_ids = data.train_val_split(tokenizer.encode(other, as_tensor=True))
        model = train.build_model(config, tokenizer.vocab_size)
        with pytest.raises(train.ResumeError, match="was trained on other data.*" + expected):
            train.train(model, train_ids, val_ids, config, device="cpu", progress=False, tokenizer=tokenizer,
                        resume=tmp_path / "run" / train.RESUME_FILE)


def test_max_iters_sets_no_memory_aside_and_the_seed_is_checked():
    """Per-step losses used to live in a tensor of max_iters elements, so a large max_iters failed to
    allocate before the first step."""
    config = train.PRESETS["tiny"].replace(max_iters=10**15, eval_interval=10**15)
    model = train.build_model(config, vocab_size=20)
    ids = torch.randint(0, 20, (500,))
    result = train.train(model, ids, ids, config, device="cpu", progress=False, callback=lambda info: True)
    assert result.stopped_early and result.history["step"] == [0] and result.iter_losses == []
    for seed in (-1, 2**63, 1.5, True):
        with pytest.raises(ValueError, match=r"seed must be an integer from 0 to 2\*\*63 - 1"):
            train.PRESETS["tiny"].replace(seed=seed)


# --- bugs of issue 32, item 6 -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_load_checkpoint_keeps_the_checkpoints_dtype(tmp_path, dtype):
    """Every model used to come back float32, whatever the checkpoint held."""
    seed_everything(0)
    model = train.build_model(train.PRESETS["tiny"], vocab_size=11).to(dtype).eval()
    path = train.save_checkpoint(tmp_path / "ckpt.pt", model)
    loaded = train.load_checkpoint(path).model
    assert {p.dtype for p in loaded.parameters()} == {dtype}
    idx = torch.randint(11, (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(idx)[0], loaded(idx)[0])


def test_lr_decay_iters_zero_means_zero_not_max_iters():
    """`lr_decay_iters or max_iters` turned 0 into max_iters: with 0 the rate is min_lr from the first step."""
    config = train.PRESETS["tiny"].replace(block_size=12, batch_size=4, max_iters=6, eval_interval=3,
                                           eval_iters=1, warmup_iters=0, lr_decay_iters=0)
    seed_everything(0)
    model = train.build_model(config, vocab_size=9)
    result = train.train(model, _reverse_batches(), _reverse_batches(), config, device="cpu", progress=False)
    assert result.history["lr"] == [config.min_lr] * len(result.history["lr"])


@pytest.mark.parametrize("field, value, allowed", [
    ("warmup_iters", -5, "an integer >= 0"),
    ("warmup_iters", 2.5, "an integer >= 0"),
    ("lr_decay_iters", -1, r"None \(= max_iters\) or an integer >= 0"),
    ("min_lr", 2e-3, r"0 <= min_lr <= learning_rate"),
])
def test_train_config_refuses_bad_schedule_fields_naming_them(field, value, allowed):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field} .*{allowed}"):
        train.TrainConfig(**{field: value})


def test_lr_at_refuses_min_lr_above_max_lr():
    with pytest.raises(ValueError, match=r"lr_at: min_lr=0\.5 .*max_lr=0\.1.*0 <= min_lr <= max_lr"):
        train.lr_at(3, max_lr=0.1, min_lr=0.5, warmup_steps=1, total_steps=10)


def test_the_module_docstring_example_runs():
    """It imported `data` from transformer_core; the data helpers live in course_runtime."""
    import doctest

    finder = doctest.DocTestFinder(exclude_empty=False)
    [test] = [t for t in finder.find(train, "transformer_core.train") if t.name == "transformer_core.train"]
    assert "from course_runtime import data" in test.docstring
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test, out=lambda text: None)
    assert result.failed == 0 and result.attempted >= 5


def test_evaluate_split_covers_every_token_once_when_the_split_is_not_a_multiple_of_block_size():
    """It used to leave out the tail that does not fill a window (up to block_size - 1 tokens)."""
    class MeanTarget(torch.nn.Module):  # loss = mean target id, so the weighting is checkable by hand
        def __init__(self):
            super().__init__()
            self.anchor = torch.nn.Parameter(torch.zeros(()))

        def forward(self, x, y):
            assert x.shape == y.shape and x.shape[1] <= 5
            return None, y.float().mean()

    ids = torch.arange(23)                   # 22 targets: four windows of 5 and a last one of 2
    assert train.evaluate_split(MeanTarget(), ids, 5, batch_size=3) == pytest.approx(11.5)  # mean of 1 .. 22
    assert train.evaluate_split(MeanTarget(), torch.arange(21), 5) == pytest.approx(10.5)   # no tail


def test_merged_evaluation_batches_give_the_same_mean_loss():
    seed_everything(0)
    model = train.build_model(train.PRESETS["tiny"], vocab_size=11)
    ids = torch.randint(11, (500,), generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    batches = [data.get_batch(ids, 3, 8, generator=gen) for _ in range(7)]
    merged = train._merge_batches(batches, max_tokens=3 * 8 * 3)          # 3 batches per merged one
    assert [len(x) for x, _ in merged] == [9, 9, 3]
    assert torch.equal(torch.cat([x for x, _ in merged]), torch.cat([x for x, _ in batches]))
    assert train.evaluate(model, merged) == pytest.approx(train.evaluate(model, batches), rel=1e-5)
    assert train._merge_batches(batches, max_tokens=1) == batches          # a batch larger than the budget stays alone


def test_num_threads_auto_keeps_at_least_one_thread_and_bad_values_are_refused():
    before = torch.get_num_threads()
    try:
        threads = train._CpuThreads("auto")
        assert 1 <= torch.get_num_threads() <= threads.max
        threads.adjust()
        assert 1 <= torch.get_num_threads() <= threads.max
    finally:
        torch.set_num_threads(before)
    assert train.PRESETS["shakespeare-cpu"].num_threads == "auto"
    for bad in (0, -1, "many", 1.5, True):
        with pytest.raises(ValueError, match="num_threads"):
            train.TrainConfig(num_threads=bad)
