"""The Chinese edition says one thing one way across its catalogues (issue 29, fifth review).

The fifth reader rated the terminology 7/10 for lack of consistency rather than wrong choices: Post-LN and
后置层规范化 on one page, $6N$ FLOPs in chapter 10 where chapter 09 says 次浮点运算, GPU 内存 beside 显存,
logit beside logits, and one grading rule worded two ways in two exercises.

Every exercise repeats some English word for word: the grading rules, how to answer a question, the
written answer's instructions, a comment on a helper that several exercises share. The fifth reader
found exercise 04 and exercise 07 stating the same rule in different Chinese ("此时调用它们，这一部分就
不得分" and "这时调用它们，这一部分的分数就没了") and wondered whether the rules differed. A learner who
opens several exercises must read one rule one way, so a block whose English is the same in several
exercises (the notebook's own file name aside) has the same Chinese in each.
"""
from pathlib import Path

from autograder.core.files import REPO_ROOT
from autograder.course.i18n import catalogues, extract, reader_checks
from autograder.course.i18n.comment_text import COMMENT_CONTEXT
from autograder.course.i18n.docstring_text import DOCSTRING_CONTEXT
from autograder.course.i18n.typesetting import MATH_CONTEXT

_CONTEXTS = (None, COMMENT_CONTEXT, DOCSTRING_CONTEXT, MATH_CONTEXT)


def disagreements(tables: dict[str, dict[tuple, str]]) -> list[str]:
    """The shared English blocks that are translated differently.

    Args:
        tables: per exercise (its name, e.g. ``rnn_limits``), ``(context, English) -> Chinese``.

    Returns:
        one line per English block with more than one Chinese, naming the exercises of each.
    """
    seen: dict[tuple, dict[str, list[str]]] = {}
    for name, table in tables.items():
        for (context, english), chinese in table.items():
            key = (context, english.replace(name, "{notebook}"))
            seen.setdefault(key, {}).setdefault(chinese.replace(name, "{notebook}"), []).append(name)
    return [f"{context or 'block'} {english[:70]!r}: " + " | ".join(f"{exercises}: {chinese[:60]}"
                                                              for chinese, exercises in versions.items())
            for (context, english), versions in seen.items() if len(versions) > 1]


def _exercise_tables(root: Path) -> dict[str, dict[tuple, str]]:
    tables = {}
    for page in extract.pages(root):
        if page.docname.startswith("exercises/"):
            tables[page.path.stem] = {(context, english): chinese for context in _CONTEXTS
                                      for english, chinese in catalogues.translations(page.docname, root,
                                                                                      context=context).items()}
    return tables


def test_a_block_shared_by_several_exercises_reads_the_same_in_each():
    tables = _exercise_tables(REPO_ROOT)
    assert len(tables) >= 12, sorted(tables)
    problems = disagreements(tables)
    assert not problems, "\n".join(problems)


def test_the_check_names_a_rule_worded_two_ways_and_lets_the_notebook_name_differ():
    rule = "- **Switched-off built-ins**: calling them costs the part."
    answer = "Run `python -m autograder validate {0}.ipynb` before you submit."
    tables = {
        "rnn_limits": {(None, rule): "此时调用它们，这一部分就不得分。",
                       (None, answer.format("rnn_limits")): "提交之前运行 `python -m autograder validate rnn_limits.ipynb`。"},
        "kv_cache": {(None, rule): "这时调用它们，这一部分的分数就没了。",
                     (None, answer.format("kv_cache")): "提交之前运行 `python -m autograder validate kv_cache.ipynb`。"},
        "complexity": {(COMMENT_CONTEXT, rule): "另一种语境下的注释"},
    }
    found = disagreements(tables)
    assert len(found) == 1 and "Switched-off" in found[0], found
    assert "['rnn_limits']" in found[0] and "['kv_cache']" in found[0], found


def test_terms_yml_finds_the_fifth_reviews_mixed_forms_and_passes_the_chosen_ones():
    terms = [dict(t, gloss=False) for t in reader_checks.load_terms(REPO_ROOT)["terms"]]
    old = {"训练每个词元的开销为 $6N$ FLOPs。": "浮点运算次数", "每次乘加计为 2 FLOPs。": "浮点运算次数",
           "众所周知，后置层规范化的 Transformer 会发散。": "Post-LN",
           "GPT-2 采用前置层规范化块。": "Pre-LN", "从 GPU 内存中读取全部权重。": "显存",
           "暂退法比率为 0.2。": "暂退法", "输入词元的 logit 更高。": "logits", "沿批次维做了规范化。": "批量"}
    for text, chosen in old.items():
        problems = reader_checks.term_problems(reader_checks.visible_prose(text), terms)
        assert any(f"(write {chosen} for" in problem for problem in problems), (text, problems)
    chosen = ("训练每个词元的开销为 $6N$ 次浮点运算，即模型算力利用率（model FLOPs utilization）的分子；"
              "实际达到 2 TFLOP/s。区分 Post-LN 与 Pre-LN；采用 Pre-LN（前置层规范化：先规范化再进入子层）的块。从显存中读取权重，"
              "暂退概率为 0.2。输入词元的 logits 值更高，`logit_scale` 与 logits 都不变。沿批量维做批量规范化。")
    assert not reader_checks.term_problems(reader_checks.visible_prose(chosen), terms)
