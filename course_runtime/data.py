"""Data for the course: a character tokenizer, corpora, batches and synthetic tasks.

Corpora:

- ``tiny_shakespeare()``: the 1.1 MB Tiny Shakespeare text (Karpathy's char-rnn data), downloaded
  once, verified by SHA-256 and cached under ``$TRANSFORMER_CORE_DATA`` or
  ``~/.cache/transformer_core``.
- ``offline_corpus()``: about 64 KB of play-like dialogue generated here from a small grammar, so
  a notebook always has text to train on, with no network and no licence question.

Synthetic tasks (``copy_task``, ``reverse_task``, ``sort_task``, ``associative_recall_task``) make
sequence-to-sequence batches of random integers; ``lm_batch`` turns one into next-token
prediction batches for a decoder-only model.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import random
import tempfile
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterable, Sequence

import torch
from tqdm.auto import tqdm

__all__ = [
    "CharTokenizer",
    "ChecksumError",
    "TINY_SHAKESPEARE_URL",
    "TINY_SHAKESPEARE_SHA256",
    "sha256_of",
    "download",
    "default_cache_dir",
    "tiny_shakespeare",
    "offline_corpus",
    "train_val_split",
    "get_batch",
    "copy_task",
    "reverse_task",
    "sort_task",
    "associative_recall_task",
    "lm_batch",
]

TINY_SHAKESPEARE_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
                        "tinyshakespeare/input.txt")
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
_TINY_SHAKESPEARE_FILE = "tinyshakespeare.txt"


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------

class CharTokenizer:
    """A character-level tokenizer: each distinct character is one token id.

    Args:
        chars: the vocabulary, one character per entry, in id order (no duplicates).

    Example:
        >>> tok = CharTokenizer.from_text("hello")
        >>> tok.chars, tok.encode("hell")
        (['e', 'h', 'l', 'o'], [1, 0, 2, 2])
        >>> tok.decode([1, 0, 2, 2, 3])
        'hello'
    """

    def __init__(self, chars: Sequence[str]):
        chars = list(chars)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"CharTokenizer: every vocabulary entry must be one character, got {bad[:5]!r}")
        if len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer: the vocabulary contains duplicate characters")
        if not chars:
            raise ValueError("CharTokenizer: the vocabulary is empty; build it from non-empty text")
        self.chars: list[str] = chars
        self.stoi: dict[str, int] = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """Build the vocabulary from the sorted set of characters in ``text``."""
        if not text:
            raise ValueError("CharTokenizer.from_text: the text is empty, so there is no vocabulary")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        """Number of distinct tokens (ids are ``0 .. vocab_size - 1``)."""
        return len(self.chars)

    def encode(self, text: str, *, as_tensor: bool = False) -> list[int] | torch.Tensor:
        """Map ``text`` to token ids.

        Args:
            text: the string to encode.
            as_tensor: return a ``torch.long`` tensor of shape ``(len(text),)`` instead of a list.

        Raises:
            ValueError: naming the characters that are not in the vocabulary.
        """
        try:
            ids = [self.stoi[c] for c in text]
        except KeyError:
            unknown = sorted({c for c in text if c not in self.stoi})
            raise ValueError(
                f"CharTokenizer.encode: {len(unknown)} character(s) are not in the vocabulary: "
                f"{', '.join(repr(c) for c in unknown[:20])}{' ...' if len(unknown) > 20 else ''}. "
                f"Build the tokenizer from text that contains them (CharTokenizer.from_text) or "
                f"remove them from the input.") from None
        return torch.tensor(ids, dtype=torch.long) if as_tensor else ids

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Map token ids (a list or a 1-D tensor) back to a string."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"CharTokenizer.decode: expected a 1-D tensor of ids, got shape "
                                 f"{tuple(ids.shape)}; decode one sequence at a time, e.g. ids[0]")
            ids = ids.tolist()
        ids = list(ids)
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"CharTokenizer.decode: ids {bad[:10]} are outside 0..{self.vocab_size - 1}")
        return "".join(self.chars[int(i)] for i in ids)

    def to_dict(self) -> dict:
        """A JSON-serialisable description (used by ``save`` and by training checkpoints)."""
        return {"type": "CharTokenizer", "version": 1, "chars": self.chars}

    @classmethod
    def from_dict(cls, state: dict) -> "CharTokenizer":
        """Rebuild a tokenizer from ``to_dict()`` output."""
        if not isinstance(state, dict) or state.get("type") != "CharTokenizer" or "chars" not in state:
            raise ValueError("CharTokenizer.from_dict: not a saved CharTokenizer "
                             "(expected a dict with type='CharTokenizer' and 'chars')")
        return cls(state["chars"])

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Write the vocabulary to ``path`` as JSON; returns the path."""
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CharTokenizer":
        """Read a tokenizer written by ``save``."""
        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"CharTokenizer.load: no file at {path}")
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self.chars == other.chars


# ----------------------------------------------------------------------------------------------
# Download and corpora
# ----------------------------------------------------------------------------------------------

class ChecksumError(ValueError):
    """A file's SHA-256 differs from the expected one."""


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, path: str | os.PathLike, sha256: str, *, progress: bool = True,
             timeout: float = 60.0) -> pathlib.Path:
    """Download ``url`` to ``path`` atomically and verify its SHA-256.

    The bytes go to a temporary file next to ``path``, which is renamed into place only when the
    checksum matches, so ``path`` never holds a partial or wrong file.

    Args:
        url: any URL ``urllib`` opens (``https://``, ``file://``).
        path: where to store the file; parent folders are created.
        sha256: the expected hex digest.
        progress: show a tqdm progress bar.
        timeout: seconds to wait for the server.

    Returns:
        ``path`` as a ``pathlib.Path``.

    Raises:
        ChecksumError: the downloaded bytes have another hash (the message names both hashes; the
            bad download is deleted).
        ConnectionError: the URL could not be read (offline, typo, server down).
    """
    path = pathlib.Path(path)
    expected = sha256.lower().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
    tmp = pathlib.Path(tmp_name)
    try:
        digest = hashlib.sha256()
        try:
            response = urllib.request.urlopen(url, timeout=timeout)
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise ConnectionError(
                f"download: could not open {url} ({err}). If you are offline, download the file on "
                f"another machine and pass its path, or use course_runtime.data.offline_corpus().") from err
        with response, os.fdopen(fd, "wb") as out:
            fd = None
            total = response.headers.get("Content-Length") if hasattr(response, "headers") else None
            with tqdm(total=int(total) if total else None, unit="B", unit_scale=True, unit_divisor=1024,
                      desc=f"downloading {path.name}", disable=not progress, leave=False) as bar:
                for block in iter(lambda: response.read(1 << 16), b""):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
        actual = digest.hexdigest()
        if actual != expected:
            raise ChecksumError(
                f"download: the file from {url} has SHA-256 {actual}, expected {expected}. The bad "
                f"download was deleted; the URL may point to a different or changed file.")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if fd is not None:
            os.close(fd)
        tmp.unlink(missing_ok=True)
    return path


def default_cache_dir() -> pathlib.Path:
    """``$TRANSFORMER_CORE_DATA`` when set, else ``~/.cache/transformer_core``."""
    env = os.environ.get("TRANSFORMER_CORE_DATA")
    return pathlib.Path(env).expanduser() if env else pathlib.Path.home() / ".cache" / "transformer_core"


def tiny_shakespeare(path: str | os.PathLike | None = None,
                     cache_dir: str | os.PathLike | None = None, *, progress: bool = True) -> str:
    """The Tiny Shakespeare corpus (1,115,394 characters), verified by SHA-256.

    Args:
        path: a local copy to read instead of the cache or the network. It is still checksum-
            verified, and never deleted.
        cache_dir: where the downloaded copy lives; default ``default_cache_dir()``.
        progress: show a progress bar while downloading.

    Returns:
        The whole text as one string.

    Raises:
        ChecksumError: ``path`` is not the expected file.
        ConnectionError: nothing cached and the download failed (the message says what to do).
    """
    if path is not None:
        path = pathlib.Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"tiny_shakespeare: no file at {path}. Pass the path of a downloaded "
                                    f"copy of {TINY_SHAKESPEARE_URL}, or path=None to download it.")
        actual = sha256_of(path)
        if actual != TINY_SHAKESPEARE_SHA256:
            raise ChecksumError(
                f"tiny_shakespeare: {path} has SHA-256 {actual}, expected {TINY_SHAKESPEARE_SHA256}, "
                f"so it is not the Tiny Shakespeare file (or it is damaged). To train on your own "
                f"text, read it with open(path).read() instead.")
        return path.read_text(encoding="utf-8")
    cached = pathlib.Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    cached = cached / _TINY_SHAKESPEARE_FILE
    if cached.is_file():
        if sha256_of(cached) == TINY_SHAKESPEARE_SHA256:
            return cached.read_text(encoding="utf-8")
        warnings.warn(f"tiny_shakespeare: the cached copy {cached} is damaged; downloading it again",
                      stacklevel=2)
        cached.unlink()
    try:
        download(TINY_SHAKESPEARE_URL, cached, TINY_SHAKESPEARE_SHA256, progress=progress)
    except ConnectionError as err:
        raise ConnectionError(
            f"tiny_shakespeare: no cached copy in {cached.parent} and the download failed ({err}). "
            f"Pass path= to a local copy, set TRANSFORMER_CORE_DATA to a folder that holds "
            f"{_TINY_SHAKESPEARE_FILE}, or use offline_corpus().") from err
    return cached.read_text(encoding="utf-8")


# The offline corpus is generated from this small grammar (written for this course). The text
# reads like a play: a speaker's name, a colon, then one to four lines of speech.
_SPEAKERS = ["ADRIAN", "BEATRIX", "CORIN", "DORCAS", "EDMUND", "FLORA", "GILES", "HELENA",
             "ISIDORE", "JULIA", "LEONTES", "MARGERY", "NESTOR", "OLIVE", "PERDITA", "ROWAN"]
_NOUNS = ["king", "queen", "river", "crown", "sword", "letter", "garden", "storm", "tower", "ship",
          "heart", "moon", "candle", "horse", "city", "harvest", "night", "morning", "bell", "gate",
          "mirror", "winter", "lantern", "forest", "promise", "secret", "quarrel", "wedding", "ring",
          "song", "field", "bridge", "prison", "feast", "shadow", "stranger", "soldier", "daughter"]
_ADJECTIVES = ["gentle", "cold", "bright", "bitter", "quiet", "golden", "false", "honest", "old",
               "young", "proud", "weary", "strange", "faithful", "cruel", "merry", "silent", "wild",
               "broken", "noble", "hollow", "sweet"]
_VERBS = [("keep", "keeps", "kept"), ("find", "finds", "found"), ("break", "breaks", "broken"),
          ("praise", "praises", "praised"), ("follow", "follows", "followed"),
          ("guard", "guards", "guarded"), ("carry", "carries", "carried"), ("fear", "fears", "feared"),
          ("love", "loves", "loved"), ("seek", "seeks", "sought"), ("forget", "forgets", "forgotten"),
          ("answer", "answers", "answered"), ("betray", "betrays", "betrayed"),
          ("remember", "remembers", "remembered"), ("burn", "burns", "burned"),
          ("open", "opens", "opened"), ("hide", "hides", "hidden"), ("mend", "mends", "mended")]
_PLACES = ["by the river", "in the garden", "at the gate", "upon the tower", "within the city",
           "beneath the moon", "across the field", "before the king", "in the forest", "on the bridge"]
_TIMES = ["tonight", "at dawn", "before the feast", "this winter", "ere the bell", "tomorrow",
          "when the storm is past", "by morning"]
_INTERJECTIONS = ["Alas", "Peace", "Hark", "O", "Come", "Nay", "Good sir", "Fair lady", "Soft", "Away"]


def _sentence(rng: random.Random, listener: str) -> str:
    noun, noun2 = rng.sample(_NOUNS, 2)
    adj, adj2 = rng.sample(_ADJECTIVES, 2)
    base, third, past = rng.choice(_VERBS)
    form = rng.randrange(10)
    if form == 0:
        return f"The {adj} {noun} {third} the {noun2} {rng.choice(_PLACES)}."
    if form == 1:
        return f"{rng.choice(_INTERJECTIONS)}, {listener.title()}! the {noun} is {adj}."
    if form == 2:
        return f"Why do you {base} the {noun} {rng.choice(_TIMES)}?"
    if form == 3:
        return f"I have {past} a {adj} {noun}, and it {third} me still."
    if form == 4:
        return f"If the {noun} be {adj}, then the {noun2} is {adj2}."
    if form == 5:
        return f"Go, {listener.title()}, and {base} the {noun} {rng.choice(_TIMES)}."
    if form == 6:
        return f"My {noun} is {adj}, and my {noun2} is {adj2}."
    if form == 7:
        return f"Who {third} the {noun} {rng.choice(_PLACES)}?"
    if form == 8:
        return f"There is a {adj} {noun} {rng.choice(_PLACES)}, and no one {third} it now."
    return f"Let us {base} the {adj} {noun} {rng.choice(_TIMES)}; the {noun2} will not wait."


@functools.lru_cache(maxsize=1)
def offline_corpus() -> str:
    """About 64 KB of play-like English dialogue, generated deterministically; needs no network.

    The text is produced by a small grammar (speaker names, ten sentence shapes built from word
    lists), so it is free of licence questions and identical on every machine. A character-level
    model learns its spelling and layout within a few hundred steps; use ``tiny_shakespeare()``
    for the real experiment.

    Returns:
        A string of at least 64,000 characters, using only printable ASCII and newlines.
    """
    rng = random.Random(1623)
    parts: list[str] = []
    size = 0
    previous = rng.choice(_SPEAKERS)
    while size < 64_000:
        speaker = rng.choice([s for s in _SPEAKERS if s != previous])
        lines = [_sentence(rng, previous) for _ in range(rng.randint(1, 4))]
        block = speaker + ":\n" + "\n".join(lines) + "\n\n"
        parts.append(block)
        size += len(block)
        previous = speaker
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# Splits and batches
# ----------------------------------------------------------------------------------------------

def train_val_split(ids: Sequence[int] | torch.Tensor,
                    val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a token stream into a training head and a validation tail (no shuffling).

    Args:
        ids: token ids, a list or a 1-D tensor of shape ``(N,)``.
        val_fraction: share of the stream, taken from the end, used for validation.

    Returns:
        ``(train, val)``: ``torch.long`` tensors of shapes ``(N - n_val,)`` and ``(n_val,)`` with
        ``n_val = round(N * val_fraction)``.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"train_val_split: val_fraction must be in (0, 1), got {val_fraction}")
    data = ids if isinstance(ids, torch.Tensor) else torch.tensor(list(ids), dtype=torch.long)
    if data.dim() != 1:
        raise ValueError(f"train_val_split: expected a 1-D stream of ids, got shape {tuple(data.shape)}")
    n_val = round(len(data) * val_fraction)
    if n_val == 0 or n_val == len(data):
        raise ValueError(f"train_val_split: {len(data)} ids are too few to split with "
                         f"val_fraction={val_fraction}")
    return data[:-n_val].long(), data[-n_val:].long()


def get_batch(data: torch.Tensor, batch_size: int, block_size: int, *,
              generator: torch.Generator | None = None,
              device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample random windows of a token stream for next-token prediction.

    Args:
        data: 1-D tensor of token ids, shape ``(N,)`` with ``N > block_size``.
        batch_size: number of windows ``B``.
        block_size: window length ``T`` (the model's context).
        generator: a CPU ``torch.Generator`` for reproducible sampling.
        device: where to put the batch (pinned, non-blocking copy for CUDA).

    Returns:
        ``(x, y)``, both ``(B, T)`` long tensors with ``y[:, t] == x[:, t + 1]``: ``y`` is ``x``
        shifted left by one, continued by the next token of ``data``.
    """
    if data.dim() != 1:
        raise ValueError(f"get_batch: data must be a 1-D stream of ids, got shape {tuple(data.shape)}")
    if len(data) <= block_size:
        raise ValueError(f"get_batch: the data has {len(data)} tokens, needs more than block_size="
                         f"{block_size}; use a shorter block_size or more text")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size + 1)
    windows = data[starts[:, None] + offsets]          # (B, T + 1)
    x, y = windows[:, :-1], windows[:, 1:]
    if device is not None and torch.device(device).type != "cpu":
        if torch.device(device).type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    return x, y


# ----------------------------------------------------------------------------------------------
# Synthetic tasks
# ----------------------------------------------------------------------------------------------

def _random_tokens(batch_size: int, seq_len: int, vocab_size: int, generator, device) -> torch.Tensor:
    if batch_size < 1 or seq_len < 1 or vocab_size < 2:
        raise ValueError(f"synthetic task: need batch_size >= 1, seq_len >= 1 and vocab_size >= 2, got "
                         f"{batch_size}, {seq_len}, {vocab_size}")
    return torch.randint(vocab_size, (batch_size, seq_len), generator=generator).to(device or "cpu")


def copy_task(batch_size: int, seq_len: int, vocab_size: int = 10, *,
              generator: torch.Generator | None = None,
              device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy: the target is the input itself.

    Vocabulary: ids ``0 .. vocab_size - 1``, uniformly random.

    Returns:
        ``(inputs, targets)``, both ``(B, seq_len)`` long tensors, ``targets == inputs``.
    """
    inputs = _random_tokens(batch_size, seq_len, vocab_size, generator, device)
    return inputs, inputs.clone()


def reverse_task(batch_size: int, seq_len: int, vocab_size: int = 10, *,
                 generator: torch.Generator | None = None,
                 device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse: the target is the input read backwards.

    Returns:
        ``(inputs, targets)``, both ``(B, seq_len)``, ``targets == inputs.flip(-1)``; ids in
        ``0 .. vocab_size - 1``.
    """
    inputs = _random_tokens(batch_size, seq_len, vocab_size, generator, device)
    return inputs, inputs.flip(-1)


def sort_task(batch_size: int, seq_len: int, vocab_size: int = 10, *,
              generator: torch.Generator | None = None,
              device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort: the target is the input sorted in ascending order.

    Returns:
        ``(inputs, targets)``, both ``(B, seq_len)``, ``targets == inputs.sort(-1).values``; ids in
        ``0 .. vocab_size - 1``.
    """
    inputs = _random_tokens(batch_size, seq_len, vocab_size, generator, device)
    return inputs, inputs.sort(dim=-1).values


def associative_recall_task(batch_size: int, n_pairs: int, n_keys: int = 16, n_values: int = 16, *,
                            generator: torch.Generator | None = None,
                            device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Associative recall: read key-value pairs, then answer the value stored under a query key.

    Vocabulary: keys are ids ``0 .. n_keys - 1``, values are ids ``n_keys .. n_keys + n_values - 1``
    (total ``n_keys + n_values``). Keys are distinct within a sequence; values may repeat.

    Returns:
        ``inputs`` of shape ``(B, 2 * n_pairs + 1)`` laid out ``k1 v1 k2 v2 ... kn vn q`` where the
        query ``q`` is one of the ``k``; ``targets`` of shape ``(B,)``: the value that followed ``q``.
    """
    if not 1 <= n_pairs <= n_keys:
        raise ValueError(f"associative_recall_task: need 1 <= n_pairs <= n_keys (keys are distinct), "
                         f"got n_pairs={n_pairs}, n_keys={n_keys}")
    if n_values < 1 or batch_size < 1:
        raise ValueError("associative_recall_task: need n_values >= 1 and batch_size >= 1")
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=-1)[:, :n_pairs]   # (B, n)
    values = n_keys + torch.randint(n_values, (batch_size, n_pairs), generator=generator)    # (B, n)
    pairs = torch.stack([keys, values], dim=-1).reshape(batch_size, 2 * n_pairs)            # (B, 2n)
    which = torch.randint(n_pairs, (batch_size, 1), generator=generator)                    # (B, 1)
    query = keys.gather(1, which)
    inputs = torch.cat([pairs, query], dim=1)
    targets = values.gather(1, which).squeeze(1)
    return inputs.to(device or "cpu"), targets.to(device or "cpu")


def lm_batch(inputs: torch.Tensor, targets: torch.Tensor, sep_token_id: int, *,
             ignore_index: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn a sequence-to-sequence batch into a next-token-prediction batch for a decoder-only LM.

    The model reads ``inputs, SEP, targets`` and is scored only where it predicts ``targets``.

    Args:
        inputs: ``(B, S)`` task inputs.
        targets: ``(B, R)`` or ``(B,)`` task targets.
        sep_token_id: the separator id; use an id no task token uses (e.g. the task's vocab size,
            so the model needs ``vocab_size + 1`` embeddings).
        ignore_index: label for positions that are not scored (``F.cross_entropy``'s default).

    Returns:
        ``(x, y)`` both ``(B, S + R)``: ``x = [inputs, SEP, targets[:, :-1]]`` and ``y`` is ``x``
        shifted by one with the first ``S`` labels set to ``ignore_index``, so that
        ``y[:, S:] == targets``.
    """
    if targets.dim() == 1:
        targets = targets[:, None]
    if inputs.dim() != 2 or targets.dim() != 2 or inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"lm_batch: expected inputs (B, S) and targets (B, R) or (B,), got "
                         f"{tuple(inputs.shape)} and {tuple(targets.shape)}")
    sep = torch.full((inputs.shape[0], 1), sep_token_id, dtype=inputs.dtype, device=inputs.device)
    sequence = torch.cat([inputs, sep, targets], dim=1)   # (B, S + 1 + R)
    x = sequence[:, :-1].clone()
    y = sequence[:, 1:].clone()
    y[:, : inputs.shape[1]] = ignore_index
    return x, y
