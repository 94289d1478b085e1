"""course_runtime.data: tokenizer, verified downloads, corpora, batches and synthetic tasks."""

import hashlib
import pathlib

import pytest
import torch

from course_runtime import data

SHAKESPEARE = pathlib.Path("/work/shared/data/tinyshakespeare.txt")
needs_shakespeare = pytest.mark.skipif(not SHAKESPEARE.is_file(), reason="no local Tiny Shakespeare copy")


def test_tokenizer_round_trip_and_vocab():
    text = "To be, or not to be:\nthat is the question."
    tok = data.CharTokenizer.from_text(text)
    assert tok.vocab_size == len(set(text))
    assert tok.chars == sorted(set(text))
    ids = tok.encode(text)
    assert isinstance(ids, list) and tok.decode(ids) == text
    tensor = tok.encode(text, as_tensor=True)
    assert tensor.dtype == torch.long and tensor.shape == (len(text),)
    assert tok.decode(tensor) == text


def test_tokenizer_unknown_characters_are_named():
    tok = data.CharTokenizer.from_text("abc")
    with pytest.raises(ValueError, match=r"2 character\(s\).*'x', 'z'"):
        tok.encode("abxcz")
    with pytest.raises(ValueError, match="outside"):
        tok.decode([0, 7])


def test_tokenizer_save_load(tmp_path):
    tok = data.CharTokenizer.from_text("héllo wörld\n")
    path = tok.save(tmp_path / "tok.json")
    assert data.CharTokenizer.load(path) == tok
    with pytest.raises(FileNotFoundError):
        data.CharTokenizer.load(tmp_path / "missing.json")


def _source(tmp_path, content=b"some bytes to download\n" * 100):
    src = tmp_path / "source.txt"
    src.write_bytes(content)
    return src, hashlib.sha256(content).hexdigest()


def test_download_with_right_checksum(tmp_path):
    src, digest = _source(tmp_path)
    out = data.download(src.as_uri(), tmp_path / "cache" / "file.txt", digest, progress=False)
    assert out.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["file.txt"]


def test_download_with_wrong_checksum_leaves_no_file(tmp_path):
    src, digest = _source(tmp_path)
    target = tmp_path / "cache" / "file.txt"
    wrong = "0" * 64
    with pytest.raises(data.ChecksumError) as info:
        data.download(src.as_uri(), target, wrong, progress=False)
    message = str(info.value)
    assert wrong in message and digest in message and "deleted" in message
    assert not target.exists()
    assert list(target.parent.iterdir()) == [], "the partial download must be removed"


def test_download_unreachable_url_is_a_connection_error(tmp_path):
    with pytest.raises(ConnectionError, match="offline_corpus"):
        data.download((tmp_path / "nope.txt").as_uri(), tmp_path / "out.txt", "0" * 64, progress=False)
    assert not (tmp_path / "out.txt").exists()


@needs_shakespeare
def test_tiny_shakespeare_from_path_is_verified(tmp_path):
    text = data.tiny_shakespeare(path=SHAKESPEARE)
    assert len(text) == 1_115_394 and text.startswith("First Citizen:")
    impostor = tmp_path / "input.txt"
    impostor.write_text("not shakespeare", encoding="utf-8")
    with pytest.raises(data.ChecksumError, match=data.TINY_SHAKESPEARE_SHA256):
        data.tiny_shakespeare(path=impostor)
    assert impostor.exists(), "a user's own file is never deleted"


@needs_shakespeare
def test_tiny_shakespeare_downloads_once_then_uses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "TINY_SHAKESPEARE_URL", SHAKESPEARE.as_uri())
    monkeypatch.setenv("TRANSFORMER_CORE_DATA", str(tmp_path / "env-cache"))
    assert data.default_cache_dir() == tmp_path / "env-cache"
    text = data.tiny_shakespeare(progress=False)
    assert (tmp_path / "env-cache" / "tinyshakespeare.txt").is_file()
    monkeypatch.setattr(data, "TINY_SHAKESPEARE_URL", (tmp_path / "gone.txt").as_uri())
    assert data.tiny_shakespeare(progress=False) == text, "the second call must read the cache"
    with pytest.raises(ConnectionError, match="offline_corpus"):
        data.tiny_shakespeare(cache_dir=tmp_path / "empty", progress=False)


def test_offline_corpus_is_deterministic_and_small():
    text = data.offline_corpus()
    assert 64_000 <= len(text) < 100_000
    assert text.isascii() and text == data.offline_corpus()
    assert ":\n" in text
    assert data.CharTokenizer.from_text(text).vocab_size < 80


def test_train_val_split():
    train, val = data.train_val_split(list(range(100)), val_fraction=0.1)
    assert torch.equal(train, torch.arange(90)) and torch.equal(val, torch.arange(90, 100))
    with pytest.raises(ValueError, match="val_fraction"):
        data.train_val_split(list(range(10)), val_fraction=1.5)
    with pytest.raises(ValueError, match="too few"):
        data.train_val_split([1, 2], val_fraction=0.1)


def test_get_batch_targets_are_inputs_shifted_by_one():
    stream = torch.arange(1000)
    x, y = data.get_batch(stream, 8, 16, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y[:, :-1], x[:, 1:])
    assert torch.equal(y, x + 1), "y must continue x by the next token of the stream"
    x2, _ = data.get_batch(stream, 8, 16, generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="block_size"):
        data.get_batch(torch.arange(10), 2, 10)


def test_copy_reverse_sort_tasks():
    g = torch.Generator().manual_seed(0)
    for task, expected in [(data.copy_task, lambda x: x),
                           (data.reverse_task, lambda x: x.flip(-1)),
                           (data.sort_task, lambda x: x.sort(-1).values)]:
        inputs, targets = task(4, 7, vocab_size=5, generator=g)
        assert inputs.shape == targets.shape == (4, 7)
        assert inputs.dtype == torch.long and int(inputs.max()) < 5 and int(inputs.min()) >= 0
        assert torch.equal(targets, expected(inputs)), task.__name__
    inputs, targets = data.reverse_task(3, 5, generator=g)
    assert targets.tolist() == [row[::-1] for row in inputs.tolist()]


def test_associative_recall_task():
    inputs, targets = data.associative_recall_task(16, 4, n_keys=8, n_values=6,
                                                   generator=torch.Generator().manual_seed(1))
    assert inputs.shape == (16, 9) and targets.shape == (16,)
    for row, target in zip(inputs.tolist(), targets.tolist()):
        keys, values, query = row[0:8:2], row[1:8:2], row[8]
        assert len(set(keys)) == 4 and all(0 <= k < 8 for k in keys)
        assert all(8 <= v < 14 for v in values)
        assert target == values[keys.index(query)]
    with pytest.raises(ValueError, match="n_pairs"):
        data.associative_recall_task(2, 9, n_keys=8)


def test_lm_batch_scores_only_the_answer():
    inputs, targets = data.reverse_task(2, 4, vocab_size=10, generator=torch.Generator().manual_seed(2))
    x, y = data.lm_batch(inputs, targets, sep_token_id=10)
    assert x.shape == y.shape == (2, 8)
    assert torch.equal(x[:, :4], inputs) and (x[:, 4] == 10).all()
    assert torch.equal(y[:, 4:], targets) and (y[:, :4] == -100).all()
    x, y = data.lm_batch(*data.associative_recall_task(3, 2), sep_token_id=32)
    assert y.shape == (3, 6) and (y[:, :5] == -100).all()
