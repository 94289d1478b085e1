"""Shared test settings: one thread per worker (make test runs one worker per core) and no display."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

torch.set_num_threads(1)
