"""Command line: ``python -m transformer_core train|generate|bench``.

Examples::

    python -m transformer_core train --preset shakespeare-cpu            # ~1.5 minutes on 2 CPU cores
    python -m transformer_core train --preset tiny --data my.txt --out runs/tiny
    python -m transformer_core generate --checkpoint runs/shakespeare-cpu/ckpt.pt --prompt "ROMEO:"
    python -m transformer_core bench --quick

``train`` ends with the line ``final val_loss <number>``. Bad arguments and missing files exit
with status 2 and a message that says what to change; failures while running exit with 1.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import warnings

__all__ = ["main", "build_parser"]


def _checked_number(convert, accept, requirement: str):
    """An argparse type: ``convert`` the text, then insist on ``accept(value)``; errors say ``requirement``."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {requirement}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text}")
        return value

    return parse


_positive_int = _checked_number(int, lambda value: value >= 1, "a whole number at least 1")
_non_negative_float = _checked_number(float, lambda value: value >= 0, "a number >= 0")
_probability = _checked_number(float, lambda value: 0 < value <= 1, "a number in (0, 1]")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with the ``train``, ``generate`` and ``bench`` sub-commands."""
    from transformer_core.train import MAX_SEED, PRESETS

    seed = _checked_number(int, lambda value: 0 <= value <= MAX_SEED, "a whole number from 0 to 2**63 - 1")

    parser = argparse.ArgumentParser(prog="python -m transformer_core",
                                     description="Train, sample from and benchmark the course's GPT.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{train,generate,bench}")

    train = commands.add_parser("train", help="train a character-level GPT",
                                description="Train a character-level GPT. The last line printed is "
                                            "'final val_loss <number>'.")
    train.set_defaults(subparser=train)
    train.add_argument("--preset", required=True, choices=sorted(PRESETS),
                       help="the recipe (model size and optimisation)")
    train.add_argument("--data", default="shakespeare",
                       help="a UTF-8 text file, 'shakespeare' (Tiny Shakespeare, downloaded once and "
                            "cached; the default) or 'offline' (the generated offline corpus)")
    train.add_argument("--out", default=None, help="folder for ckpt.pt (default: runs/<preset>)")
    train.add_argument("--max-iters", type=_positive_int, default=None, help="override the preset's steps")
    train.add_argument("--device", default=None, help="cuda, cuda:1, mps or cpu (default: best available)")
    train.add_argument("--compile", action="store_true", help="use torch.compile (GPU)")
    train.add_argument("--seed", type=seed, default=None, help="override the preset's seed")
    train.add_argument("--threads", type=_positive_int, default=None,
                       help="CPU threads for PyTorch (default: one per core; on a busy shared machine "
                            "1 thread avoids threads waiting for each other)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--grad-accum", type=_positive_int, default=None,
                       help="micro-batches per optimizer step, over all processes (default: the preset's, "
                            "rounded up to a multiple of the number of torchrun processes)")
    train.add_argument("--resume", action="store_true",
                       help="continue the run in --out from its last evaluation (<out>/last.pt)")
    train.add_argument("--overwrite", action="store_true",
                       help="start afresh in an --out folder that holds an earlier run's checkpoints")

    gen = commands.add_parser("generate", help="sample text from a checkpoint",
                              description="Continue a prompt with a trained checkpoint, using the KV cache.")
    gen.set_defaults(subparser=gen)
    gen.add_argument("--checkpoint", required=True, help="a ckpt.pt written by `train`")
    gen.add_argument("--prompt", default=None,
                     help="text to continue (default: a newline, or the first vocabulary character)")
    gen.add_argument("--max-new-tokens", type=_positive_int, default=500, help="tokens to generate (default 500)")
    gen.add_argument("--temperature", type=_non_negative_float, default=0.8,
                     help="sampling temperature; 0 means greedy decoding (default 0.8)")
    gen.add_argument("--top-k", type=_positive_int, default=None, help="sample among the k most likely")
    gen.add_argument("--top-p", type=_probability, default=None, help="nucleus sampling mass in (0, 1]")
    gen.add_argument("--seed", type=seed, default=1337, help="sampling seed (default 1337)")
    gen.add_argument("--no-cache", action="store_true", help="recompute the whole context every step")
    gen.add_argument("--compile", action="store_true",
                     help="compile the decode step (fixed shapes, a static cache; CUDA graphs on a GPU)")
    gen.add_argument("--device", default=None)

    bench = commands.add_parser("bench", help="time naive vs fused attention, cached vs uncached generation and a training step (MFU)")
    bench.set_defaults(subparser=bench)
    bench.add_argument("--quick", action="store_true", help="short version (about a minute on a CPU)")
    bench.add_argument("--device", default=None)
    bench.add_argument("--out", default="benchmarks/results",
                       help="where to store the results (default benchmarks/results)")
    return parser


def _device_or_exit(parser: argparse.ArgumentParser, name):
    from course_runtime.device import pick_device

    try:
        return pick_device(name)
    except (RuntimeError, ValueError) as err:
        parser.error(f"--device: {err}")


def _load_text(parser: argparse.ArgumentParser, source: str) -> str:
    from course_runtime import data

    if source == "shakespeare":
        try:
            return data.tiny_shakespeare()
        except (ConnectionError, data.ChecksumError) as err:
            raise SystemExit(f"error: {err}\nOr train on the offline corpus: --data offline") from None
    if source == "offline":
        return data.offline_corpus()
    path = pathlib.Path(source).expanduser()
    if path.is_dir():
        parser.error(f"--data {source}: is a folder, not a file. Give a UTF-8 text file, 'shakespeare' or "
                     f"'offline'.")
    if not path.is_file():
        parser.error(f"--data {source}: no such file. Give a UTF-8 text file, 'shakespeare' or 'offline'.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        parser.error(f"--data {source}: not UTF-8 text")
    if not text.strip():
        parser.error(f"--data {source}: the file is empty (or only whitespace); give the text to train on")
    return text


def _folder_or_exit(parser: argparse.ArgumentParser, flag: str, folder: pathlib.Path) -> None:
    """Exit with a message unless ``folder`` is a folder that exists or can be created and written."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"is inside {existing}, which is a file"
        parser.error(f"{flag} {folder}: {where}, not a folder; give a folder (it is created if missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        parser.error(f"{flag} {folder}: cannot write in {existing}; give a folder you may write to")


def _train(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``train``, in one process or in each of the processes ``torchrun`` starts (rank 0 reports)."""
    import contextlib
    import io

    from transformer_core import distributed

    if distributed.from_environment().is_main:
        return _train_in_group(parser, args)
    # The other processes see the same arguments, data and checkpoints, so they meet the same bad
    # input: rank 0 says it once. They exit with the same status; a traceback (an unexpected
    # failure) is printed after the redirection ends, so it still reaches stderr.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return _train_in_group(parser, args)


def _train_in_group(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from transformer_core import distributed

    device = _device_or_exit(parser, args.device)
    with distributed.process_group(device) as ranks:
        if ranks.world_size > 1 and device.type == "cuda":
            device = _device_or_exit(parser, f"cuda:{ranks.local_rank}")
        return _train_in_process(parser, args, device, ranks.world_size)


def _train_in_process(parser: argparse.ArgumentParser, args: argparse.Namespace, device, world_size: int) -> int:
    import torch

    from course_runtime import data
    from transformer_core import distributed
    from course_runtime.device import describe_device, seed_everything
    from transformer_core.train import (PRESETS, RESUME_FILE, ResumeError, build_model, evaluate_split,
                                        resolve_amp_dtype, train)

    config = PRESETS[args.preset]
    changes = {"out_dir": str(pathlib.Path(args.out).expanduser() if args.out else pathlib.Path("runs") / args.preset)}
    if args.max_iters is not None:
        changes["max_iters"] = args.max_iters
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.compile:
        changes["compile"] = True
    if args.threads is not None:
        changes["num_threads"] = args.threads
    preset_accum = config.grad_accum_steps
    if args.grad_accum is not None:
        if args.grad_accum % world_size:
            parser.error(f"--grad-accum {args.grad_accum}: must be a multiple of the {world_size} processes that "
                         f"torchrun started (each runs the same number of micro-batches), e.g. --grad-accum "
                         f"{-(-args.grad_accum // world_size) * world_size}")
        changes["grad_accum_steps"] = args.grad_accum
    elif preset_accum % world_size:      # each process runs at least one micro-batch per step
        changes["grad_accum_steps"] = -(-preset_accum // world_size) * world_size
    config = config.replace(**changes)
    out_dir = pathlib.Path(config.out_dir)
    _folder_or_exit(parser, "--out", out_dir)
    resume_path = out_dir / RESUME_FILE
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --out and --overwrite starts it afresh: choose one")
    if args.resume and not resume_path.is_file():
        parser.error(f"--resume: {resume_path} does not exist; it is written at every evaluation of a run "
                     f"with --out {out_dir}")
    earlier = [name for name in ("ckpt.pt", RESUME_FILE) if (out_dir / name).exists()]
    if earlier and not (args.resume or args.overwrite):
        parser.error(f"--out {out_dir} holds an earlier run ({', '.join(earlier)}); pass --resume to continue "
                     f"it, --overwrite to start afresh, or choose another --out")
    text = _load_text(parser, args.data)
    tokenizer = data.CharTokenizer.from_text(text)
    ids = tokenizer.encode(text, as_tensor=True)
    if len(ids) < 20 * (config.block_size + 1):
        parser.error(f"--data: {len(ids)} characters are too few for preset {args.preset!r} (context "
                     f"{config.block_size}); use at least {20 * (config.block_size + 1)} characters")
    train_ids, val_ids = data.train_val_split(ids, 0.1)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    seed_everything(config.seed)
    model = build_model(config, tokenizer.vocab_size)
    print(describe_device(device).splitlines()[1])
    print(f"data: {len(train_ids):,} training and {len(val_ids):,} validation characters, "
          f"vocabulary {tokenizer.vocab_size}")
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, preset {args.preset}, "
          f"{config.max_iters} steps of {config.batch_size} x {config.block_size} tokens")
    if config.grad_accum_steps != preset_accum and args.grad_accum is None:
        print(f"grad-accum: {config.grad_accum_steps} micro-batches per step, {config.grad_accum_steps // world_size} "
              f"in each of {world_size} processes (the preset's {preset_accum}, rounded up to a multiple of the "
              f"processes; --grad-accum chooses)")
    sys.stdout.flush()
    try:
        result = train(model, train_ids, val_ids, config, device=device, progress=not args.quiet,
                       tokenizer=tokenizer, resume=resume_path if args.resume else None)
    except ResumeError as err:                    # damaged, or of another recipe or other data
        parser.error(f"--resume: {err}")
    except ValueError as err:
        parser.error(str(err))
    for step, train_loss, val_loss in zip(result.history["step"], result.history["train_loss"],
                                          result.history["val_loss"]):
        print(f"step {step:>6}: train loss {train_loss:.4f}, val loss {val_loss:.4f}")
    mfu = f", MFU {100 * result.mfu:.1f}%" if result.mfu is not None else ""
    print(f"{result.wall_time_s:.1f} s, {result.tokens_per_second:,.0f} tokens/s ({result.dtype}){mfu}")
    whole_split = evaluate_split(model, val_ids, config.block_size,
                                 amp_dtype=resolve_amp_dtype(config, device))
    print(f"val loss on the whole validation split ({len(val_ids) - 1:,} tokens, in windows "
          f"of {config.block_size}): {whole_split:.4f}")
    if not distributed.current().is_main:
        return 0
    summary = _write_summary(pathlib.Path(config.out_dir), args.preset, config, result, device, whole_split)
    print(f"checkpoint (best val loss {result.best_val_loss:.4f}): {result.checkpoint_path}; summary: {summary}")
    print(f"final val_loss {result.final_val_loss:.4f}")
    return 0


def _write_summary(out_dir: pathlib.Path, preset: str, config, result, device, whole_split: float) -> pathlib.Path:
    """``<out>/summary.json``: what ran where and what it measured, for benchmarks/results."""
    import dataclasses
    import datetime
    import json
    import os

    import torch

    from transformer_core.bench import device_name

    summary = {"preset": preset, "device": device_name(device), "torch": torch.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
               "config": dataclasses.asdict(config),
               **{key: value for key, value in dataclasses.asdict(result).items() if key != "iter_losses"},
               "val_loss_whole_split": whole_split}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path


def _generate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import torch

    from transformer_core.generation import generate
    from transformer_core.train import load_checkpoint

    device = _device_or_exit(parser, args.device)
    checkpoint_path = pathlib.Path(args.checkpoint).expanduser()
    if checkpoint_path.is_dir():
        inside = checkpoint_path / "ckpt.pt"
        hint = f"; did you mean {inside}?" if inside.is_file() else "; give the ckpt.pt file that `train` wrote"
        parser.error(f"--checkpoint {args.checkpoint}: is a folder, not a checkpoint file{hint}")
    if not checkpoint_path.is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no such file. Train one first, e.g. "
                     f"`python -m transformer_core train --preset tiny --data offline`.")
    try:
        checkpoint = load_checkpoint(checkpoint_path, device=device)
    except (ValueError, RuntimeError) as err:
        parser.error(f"--checkpoint {args.checkpoint}: {err}")
    tokenizer = checkpoint.tokenizer
    if tokenizer is None:
        parser.error(f"--checkpoint {args.checkpoint} holds no tokenizer, so its tokens cannot be decoded")
    prompt = args.prompt
    if not prompt:
        prompt = "\n" if "\n" in tokenizer.stoi else tokenizer.chars[0]
    try:
        idx = tokenizer.encode(prompt, as_tensor=True)[None].to(device)
    except ValueError as err:
        parser.error(f"--prompt: {err}")
    generator = torch.Generator(device=device).manual_seed(args.seed)
    greedy = args.temperature == 0
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            # PyTorch's own deprecation warnings (torch.compile's inductor raises 14 about torch.jit on a
            # CPU) are about PyTorch's internals, not about this command: they are not the learner's notes.
            for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
                warnings.filterwarnings("ignore", category=category, module=r"torch(\.|$)")
            out = generate(checkpoint.model, idx, args.max_new_tokens, do_sample=not greedy,
                           temperature=1.0 if greedy else args.temperature, top_k=args.top_k, top_p=args.top_p,
                           use_cache=not args.no_cache, generator=generator, compile=args.compile)
    except TypeError as err:                      # a checkpoint of a model that cannot generate
        parser.error(f"--checkpoint {args.checkpoint}: {err}")
    except ValueError as err:                     # e.g. --compile for a model it cannot decode
        parser.error(str(err))
    for note in notes:                            # e.g. --compile with more tokens than the context
        print(f"note: {note.message}", file=sys.stderr)
    print(tokenizer.decode(out[0]))
    return 0


def _bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from transformer_core.bench import format_markdown, run_benchmarks, save_results

    device = _device_or_exit(parser, args.device)
    _folder_or_exit(parser, "--out", pathlib.Path(args.out).expanduser())      # before minutes of benchmarking
    results = run_benchmarks(quick=args.quick, device=device)
    json_path, md_path = save_results(results, args.out)
    print(format_markdown(results))
    print(f"saved {json_path} and {md_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits with 2 on bad arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = {"train": _train, "generate": _generate, "bench": _bench}[args.command]
    return handler(args.subparser, args)


if __name__ == "__main__":
    sys.exit(main())
