"""Every hint a visible test can show is extracted for the Chinese catalogue, whatever form the test
gives it (issue 29: exercise 04's ``hints`` dict, exercise 07's top-p table behind ``if p < 1 else []``
and a dozen defaults after ``or`` reached a Chinese learner in English, because the extraction followed
none of those forms, so ``test_every_message_a_chinese_learner_can_be_shown_is_chinese`` never saw them);
and those exercises' classic wrong answers fail with a hint a Chinese kernel shows in Chinese."""

import ast
import re

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n import code_values, extract, runtime_text
from autograder.engine.cells import parse_cell
from course_runtime.language import catalogue
from test_i18n import _english_sentences

# A test cell that shows a hint in each of the forms the released exercises use.
_FORMS = '''
def _which(actual, known_mistakes):
    """The hint of the first known mistake that `actual` reproduces, or None."""
    for hint, wrong in known_mistakes:
        if torch.equal(actual, wrong):
            return hint
    return None

def _table(probs):
    return [("sort in descending order first.", probs.flip(-1))]

def _telling(expected, variants):
    kept = {}
    for hint, wrong in variants.items():
        if not torch.equal(wrong, expected):
            kept[hint] = wrong
    return kept

_TABLE = {"scale": "divide the scores by sqrt(head_dim).", "mask": "block the future keys."}

def _after(*parts):
    def decorate(check):
        def checked():
            for part, part_check in parts:
                raise AssertionError(f"First fix {part}: its own test fails.")
        return checked
    return decorate

@_after(("Part A (split_heads)", _part_a))
def _check(out, expected, got, p, variants):
    check_close(out, expected, name="out", hint=_which(out, [("cut the last axis first.", out.T)])
                or "out[b, i, t] must be x[b, t, i * d:(i + 1) * d]")
    check_close(out, expected, name="out", hint=_which(out, _table(out) if p < 1 else []) or "keep the top tokens.")
    mistakes = [("apply out_proj.", out)]
    mistakes.insert(0, ("queries come from the decoder.", out))
    check_close(out, expected, name="out", mistakes=mistakes)
    check_close(out, expected, name="out", mistakes={hint: variants[m] for m, hint in _TABLE.items()})
    check_close(out, expected, name="out", mistakes=_telling(expected, {h: out for h in ("a computed hint here.",)}))
    hints = {4 * got: "the count does not grow with n_heads."}
    raise AssertionError(f"got {got}.\\nHint: {hints.get(got, 'count each nn.Linear: in * out + out')}")

def _minilm(found, table):
    hint = next((h for h, wrong in table.items() if wrong == found), "embeddings -> emb_norm -> layers")
    with forbid_shortcuts("torch.cat", reason="write into the buffers in place"), explain_errors(
            "keep the sub-modules", call="MiniLM loaded with its weights"):
        pass
    assert found, f"your embeddings differ. Likely cause: {hint}"
    assert "First fix Part" not in found
    assert "view size is not compatible" in found
'''

_SHOWN = ["cut the last axis first.", "out[b, i, t] must be x[b, t, i * d:(i + 1) * d]",
          "sort in descending order first.", "keep the top tokens.", "apply out_proj.",
          "queries come from the decoder.", "divide the scores by sqrt(head_dim).", "block the future keys.",
          "a computed hint here.", "the count does not grow with n_heads.", "count each nn.Linear: in * out + out",
          "embeddings -> emb_norm -> layers", "write into the buffers in place", "keep the sub-modules",
          "MiniLM loaded with its weights", "Part A (split_heads)"]


def test_every_form_of_hint_a_test_cell_gives_is_extracted():
    """A hint after ``or``, a table chosen by ``if ... else``, one ``insert``-ed, a dict looked up with
    ``.get`` (values and default) or stored into by key, a comprehension's table, ``next``'s default,
    ``forbid_shortcuts``' ``reason=``, ``explain_errors``' ``call=`` phrase and a decorator's ``*parts``
    are all messages; what a test only compares with (``"First fix Part" not in ...``) and a docstring
    are not."""
    found = {text for text, _ in runtime_text.code_strings([_FORMS], figures=False)}
    missing = [hint for hint in _SHOWN if hint not in found]
    assert not missing, missing
    assert not {"First fix Part", "view size is not compatible",
                "The hint of the first known mistake that `actual` reproduces, or None."} & found


def test_a_hint_without_a_chinese_entry_is_reported():
    """The other direction: a test cell's hint that the catalogue lacks is what the check names, and the
    catalogue's entries are what it accepts."""
    table = catalogue("messages", "zh_CN")
    cell = ('check_close(y, ref, name="y", hint=_which(y, []) or "a hint no catalogue holds, written for this test")\n'
            'check_close(y, ref, name="y", hint=_which(y, []) or '
            '"renormalise: divide the kept probabilities by their sum, so that each row sums to 1.")\n')
    untranslated = [text for text, _ in runtime_text.code_strings([cell], figures=False) if table.lookup(text) is None]
    assert untranslated == ["a hint no catalogue holds, written for this test"]


# Sentences of the released exercises' code that no test shows a learner, each with why.
_NOT_SHOWN = {
    "view size is not compatible": "compared with PyTorch's error, to choose the hint",
    "First fix Part": "looked for in a message, which shows it through the pattern that writes it",
    "the cat sat on the mat": "the input of a tokenizer",
    "The animal didn't cross the street because it was too tired.": "an input sentence of MiniLM",
    "A cat sleeps.": "an input sentence of MiniLM",
    "{value / 2 ** 30:.2f} GiB": "a number and its unit",
    "same buffers": "a key of a dict the test reads",
    "Tiny Shakespeare could not be loaded, so the cells below train on {corpus} instead. The reason: {error}":
        "printed through textwrap.fill, whose wrapped lines no entry matches",
}


def _sentences(source: str) -> list[str]:
    """The string literals and f-strings of a cell (not its docstrings, not the pieces of an f-string)
    that hold a space and English words and are not a call written as code."""
    tree = parse_cell(source)
    if isinstance(tree, SyntaxError):
        return []
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    inside = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
              for part in ast.walk(node) if part is not node}
    texts = [code_values.string_value(node) for node in ast.walk(tree)
             if id(node) not in docstrings | inside]
    return [text for text, _ in filter(None, texts) if " " in text.strip() and runtime_text._is_words(text)
            and not runtime_text._is_code(text)]


def test_every_sentence_in_a_released_exercise_is_extracted_or_known_not_to_be_shown():
    """Read apart from the extraction: every sentence written in a released exercise's code is in the
    runtime catalogues' strings (whole, or as a piece of a message the code adds up), or is listed above
    with why no learner sees it. A hint in a form the extraction does not follow fails here."""
    shown = runtime_text.runtime_messages(REPO_ROOT)
    extracted = {text for text, _ in shown["messages"] + shown["figures"]}
    unseen = set()
    for page in extract.pages(REPO_ROOT):
        if page.is_notebook and page.docname.startswith("exercises/"):
            for cell in read_notebook(page.path).cells:
                if cell.cell_type == "code":
                    unseen |= {text for text in _sentences(cell.source) if not any(
                        text in e or text.replace("{", "{{").replace("}", "}}") in e for e in extracted)}
    assert unseen - set(_NOT_SHOWN) == set(), sorted(unseen - set(_NOT_SHOWN))
    assert set(_NOT_SHOWN) - unseen == set(), f"listed as not shown but extracted or gone: {set(_NOT_SHOWN) - unseen}"


# --- The failure paths of exercises 04 and 07 as a Chinese kernel shows them --------------------------

_E04 = "zh/exercises/04-multi-head-attention/multi_head_attention.ipynb"
_E07 = "zh/exercises/07-three-architectures/three_architectures.ipynb"


def _top_p(probs, p, keep_of, *, scatter=True, normalise=True, descending=True):
    """Top-p written with one classic mistake: ``keep_of(sorted, running sum)`` chooses the sorted tokens."""
    import torch

    s, order = torch.sort(probs, dim=-1, descending=descending, stable=True)
    keep_sorted = keep_of(s.double(), s.double().cumsum(-1))
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted) if scatter else keep_sorted
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(-1, keepdim=True) if normalise else kept


def _wrong_answers():
    """(notebook, test cell, name, wrong function, the start of the English hint its message must give)."""
    def split(x, h, cut="heads first"):
        B, T, d = x.shape
        if cut == "memory order":
            return x.reshape(B, h, T, d // h)
        if cut == "features first":
            return x.reshape(B, T, d // h, h).permute(0, 3, 1, 2)
        return x.reshape(B, T, h, d // h).transpose(1, 2).flip(-1)

    def merge(x, how):
        B, h, T, d = x.shape
        moved = {"reshape": x, "interleaved": x.permute(0, 2, 3, 1), "flipped": x.transpose(1, 2).flip(-1)}[how]
        return moved.reshape(B, T, h * d)

    return [
        (_E04, "test_split_heads", "split_heads", lambda x, h: split(x, h, "memory order"), "x.reshape(B, n_heads"),
        (_E04, "test_split_heads", "split_heads", lambda x, h: split(x, h, "features first"), "you cut the last axis"),
        (_E04, "test_split_heads", "split_heads", split, "out[b, i, t] must be"),
        (_E04, "test_merge_heads", "merge_heads", lambda x: merge(x, "reshape"), "x.reshape(B, T, h * d_k)"),
        (_E04, "test_merge_heads", "merge_heads", lambda x: merge(x, "interleaved"), "the heads are interleaved"),
        (_E04, "test_merge_heads", "merge_heads", lambda x: merge(x, "flipped"), "out[b, t, i * d_k"),
        (_E04, "test_attention_parameter_count", "attention_parameter_count",
         lambda d, h, n_kv_heads=None, bias=True: 4 * d * d * h + (4 * d * h if bias else 0),
         "the count does not grow"),
        (_E04, "test_attention_parameter_count", "attention_parameter_count",
         lambda d, h, n_kv_heads=None, bias=True: 4 * d * d, "you left out the biases"),
        (_E04, "test_attention_parameter_count", "attention_parameter_count",
         lambda d, h, n_kv_heads=None, bias=True: 3 * d * d + (3 * d if bias else 0), "you forgot out_proj"),
        (_E04, "test_attention_parameter_count", "attention_parameter_count",
         lambda d, h, n_kv_heads=None, bias=True: 7, "count each nn.Linear"),
        (_E07, "test_top_k_probs", "top_k_probs", lambda probs, k: probs.flip(-1), "keep the k largest entries"),
        (_E07, "test_top_p_probs", "top_p_probs", lambda probs, p: _top_p(probs, p, lambda s, c: c < p),
         "the token that crosses p"),
        (_E07, "test_top_p_probs", "top_p_probs",
         lambda probs, p: _top_p(probs, p, lambda s, c: c - s < p, normalise=False), "renormalise"),
        (_E07, "test_top_p_probs", "top_p_probs",
         lambda probs, p: _top_p(probs, p, lambda s, c: c - s < p, scatter=False), "the mask is in sorted order"),
        (_E07, "test_top_p_probs", "top_p_probs", lambda probs, p: _top_p(probs, p, lambda s, c: c - s <= p),
         "keep a token only when the mass before it is strictly"),
        (_E07, "test_top_p_probs", "top_p_probs",
         lambda probs, p: _top_p(probs, p, lambda s, c: c - s < p, descending=False), "sort in DESCENDING order"),
        (_E07, "test_top_p_probs", "top_p_probs", lambda probs, p: probs.flip(-1), "keep a token when the probability"),
    ]


def test_the_named_mistakes_of_exercises_04_and_07_read_chinese():
    """Each classic wrong answer of exercise 04's heads and parameter count and exercise 07's top-k and top-p
    fails the Chinese notebook's visible test with its own hint (review 4, 一.2, listed them as shown in
    English), and the message, translated as a Chinese kernel's traceback translates it, has no English
    sentence left."""
    import torch
    import torch.nn as nn

    from course_runtime.language import translate_message

    cells = {path: {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
                    for c in read_notebook(REPO_ROOT / path).cells} for path in (_E04, _E07)}
    for path, test, name, wrong, hint in _wrong_answers():
        try:
            exec(cells[path][test], {"torch": torch, "nn": nn, name: wrong})
        except AssertionError as error:
            english = str(error)
        else:
            raise AssertionError(f"{test} passed a wrong {name} (expected the hint {hint!r})")
        assert f"\nHint: {hint}" in english, (hint, english)
        chinese = translate_message(english, "zh_CN")
        english_hint = english.rpartition("\nHint: ")[2]
        assert "\n提示：" in chinese and english_hint not in chinese and not _english_sentences(chinese), chinese


def test_the_guards_refusal_at_a_kernel_reads_chinese_with_and_without_the_function_it_stands_for():
    """The refusal of a forbidden built-in's kernel is two sentences, one that names the function the
    kernel computes and one for the built-in itself; both are entries, so a Chinese kernel shows both in
    Chinese (with an optional clause, the second had no entry: a placeholder stands for some text)."""
    from course_runtime import testing
    from course_runtime.language import translate_message

    public = "scaled_dot_product_attention"
    blockwise = ("compute the scores of one key block at a time and combine the blocks with the online softmax "
                 "(running max, running sum, rescaled output)")
    for dotted_name, reason in (("transformer_core.attention." + public, None), (public, None), (public, blockwise)):
        chinese = translate_message(testing._kernel_message(dotted_name, public, reason), "zh_CN")
        assert chinese.startswith("请自己实现。") and not _english_sentences(chinese), chinese
        assert dotted_name in chinese and ("所计算的内容" in chinese) == (dotted_name != public), chinese


# --- The errors the exercises' given code raises, as a Chinese kernel shows them ----------------------


def _raised_messages():
    """(exercise, exception class, message node) of every ``raise X(message)`` in a released exercise's code
    whose message is words (a literal or an f-string, not a name such as ``raise ValueError(mistake)``)."""
    found = []
    for page in extract.pages(REPO_ROOT):
        if page.is_notebook and page.docname.startswith("exercises/"):
            for cell in read_notebook(page.path).cells:
                tree = parse_cell(cell.source) if cell.cell_type == "code" else None
                for node in ast.walk(tree) if isinstance(tree, ast.AST) else []:
                    if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
                            and isinstance(node.exc.args[0], (ast.Constant, ast.JoinedStr))):
                        found.append((page.docname, getattr(node.exc.func, "id", "?"), node.exc.args[0]))
    return found


def test_every_error_an_exercise_raises_is_translated_by_a_chinese_kernel():
    """Every class the exercises' code raises with a message is one a Chinese kernel shows translated (a
    given ``raise TypeError("...")`` fails here until ``course_runtime.language`` lists it), and every such
    message has a Chinese entry (review 6, item 74: exercise 04's given ``__init__`` said its ValueError in
    English)."""
    from course_runtime.language import COURSE_ERRORS, GIVEN_CODE_ERRORS

    raised = _raised_messages()
    assert any(kind == "ValueError" for _, kind, _ in raised)          # the check sees the given code's errors
    assert [(page, kind) for page, kind, _ in raised if kind not in COURSE_ERRORS + GIVEN_CODE_ERRORS] == []
    from autograder.course.i18n.catalogues import read_catalogue

    entries = {m.id: m.string for m in read_catalogue(runtime_text.runtime_catalogue_path("messages")) if not m.fuzzy}
    given = [(page, code_values.string_value(node)[0]) for page, kind, node in raised if kind in GIVEN_CODE_ERRORS]
    assert [(page, text) for page, text in given if not entries.get(text)] == []


class _Shell:
    """What the traceback handler is given by IPython: it records the error it is asked to show."""

    def __init__(self):
        self.shown = []

    def set_custom_exc(self, classes, handler):
        self.classes, self.handler = classes, handler

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.shown.append(exc_tuple[1])


def _shown_by_a_chinese_kernel(error: BaseException) -> str:
    from course_runtime import language

    shell = _Shell()
    assert language._install_tracebacks(language.CHINESE, shell)
    assert isinstance(error, shell.classes)
    previous = language._chosen
    language._chosen = language.CHINESE
    try:
        shell.handler(shell, type(error), error, None)
    finally:
        language._chosen = previous
    return str(shell.shown[-1])


def _given_code(path: str, name: str):
    """The class ``name`` of a Chinese exercise, defined by running the code cell that defines it here."""
    import torch
    import torch.nn as nn

    cell = next(c for c in read_notebook(REPO_ROOT / path).cells
                if c.cell_type == "code" and re.search(rf"^class {name}\b", c.source, re.MULTILINE))
    namespace = {"torch": torch, "nn": nn}
    exec(cell.source, namespace)
    return namespace[name]


def test_a_chinese_kernel_shows_the_given_codes_errors_in_chinese_and_leaves_pytorchs_alone():
    """Exercise 04's given ``__init__`` and exercise 12's given cache raise their ValueError; a Chinese kernel's
    traceback shows each message Chinese, its numbers kept, no English sentence left; a ValueError the
    catalogue does not know whole (PyTorch's, a learner's) is shown exactly as raised."""
    import torch

    attention = _given_code(_E04, "MultiHeadAttention")
    cache_class = _given_code("zh/exercises/12-llama-style-gpt/llama_style_gpt.ipynb", "KVCache")
    cache = cache_class(n_layers=1, batch_size=2, max_len=4, n_kv_heads=3, head_dim=5)
    errors = []
    for make in (lambda: attention(30, 4), lambda: cache.update(0, torch.zeros(2, 3, 5, 5), torch.zeros(2, 3, 5, 5)),
                 lambda: cache.update(0, torch.zeros(2, 6, 1, 5), torch.zeros(2, 6, 1, 5))):
        try:
            make()
        except ValueError as error:
            errors.append((str(error), _shown_by_a_chinese_kernel(error)))
    assert len(errors) == 3, errors
    for english, chinese in errors:
        assert chinese != english and sorted(re.findall(r"\d+", chinese)) == sorted(re.findall(r"\d+", english)), chinese
        assert re.search(r"[\u4e00-\u9fff]", chinese) and not _english_sentences(chinese), chinese
    for foreign in ("not enough values to unpack (expected 2, got 3)",
                    "d_model=30 must be divisible by n_heads=4, and the heads must be even"):
        assert _shown_by_a_chinese_kernel(ValueError(foreign)) == foreign
