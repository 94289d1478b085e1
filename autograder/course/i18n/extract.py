"""The English pages cut into blocks, and the blocks a translator translates (the messages)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook


LANGUAGE = "zh_CN"
LOCALE_DIR = Path("locales") / LANGUAGE / "LC_MESSAGES"
ZH_ROOT = "zh"
# The Chinese book's own words that are not in any page: the toc captions and the site title.
SITE_DOC = "_site"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
COLAB_PATH = re.compile(r"(https://colab\.research\.google\.com/github/[^)\s\"'>]+?/blob/[^/)\s]+/)([^)\s\"'>]+\.ipynb)")


def blocks(text: str) -> list[str]:
    """Cut Markdown into blocks separated by blank lines, never inside a fenced code block or a
    ``$$`` display-math block (a fence whose info string is a MyST directive, ``{note}``, ``{glossary}``,
    holds prose and is cut like the rest).

    Example:
        >>> blocks("# Title\\n\\nOne.\\nStill one.\\n\\n```python\\nx = 1\\n\\ny = 2\\n```")
        ['# Title', 'One.\\nStill one.', '```python\\nx = 1\\n\\ny = 2\\n```']
    """
    out, current, closing, in_math, directives = [], [], None, False, []
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if closing is not None:
            current.append(line)
            if fence and fence.group(2).startswith(closing) and not fence.group(3).strip():
                closing = None
            continue
        info = fence.group(3).strip() if fence else ""
        if fence and not info and directives and fence.group(2).startswith(directives[-1]):
            directives.pop()                  # the end of a directive ({admonition}): not a code fence
        elif fence and not info.startswith("{"):
            closing = fence.group(2)
        elif fence and info.startswith(("{code", "{math}")):
            closing = fence.group(2)
        elif fence:
            directives.append(fence.group(2))
        if line.strip() == "$$" or (line.strip().startswith("$$") and line.strip().count("$$") == 1):
            in_math = not in_math
        if not line.strip() and closing is None and not in_math:
            if current:
                out.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return out


_NOT_PROSE = [re.compile(p, re.DOTALL | re.MULTILINE) for p in (
    # fenced code; a directive's fence ({admonition}, {dropdown}, {note}) holds prose and stays
    r"(`{3,}|~{3,})(?![ \t]*\{(?!code|math))[^\n]*\n.*?\1",
    r"\$\$.*?\$\$", r"\$[^$\n]+\$",          # math
    r"`[^`\n]+`",                            # inline code
    r"!\[[^\]]*\]",                           # image alt text (the Colab badge)
    r"\]\([^)]*\)", r"https?://\S+",         # link targets, addresses
    r"^\s*(`{3,}|:{3,})\{[^}]*\}[^\n]*$",     # directive openers
    r"^\s*:[\w-]+:[^\n]*$",                  # directive options
    r"^\s*(`{3,}|:{3,})\s*$",                # fence closers
    r"\{[\w:-]+\}",                          # roles such as {term} and {cite:p}
)]


def needs_translation(block: str) -> bool:
    r"""Whether a block holds words to translate (not only code, math, links or markup).

    Example:
        >>> needs_translation("$$\nx = 1\n$$"), needs_translation("The scale is $1/\\sqrt{d}$.")
        (False, True)
    """
    rest = block
    for pattern in _NOT_PROSE:
        rest = pattern.sub(" ", rest)
    return re.search(r"[A-Za-z]{2,}", rest) is not None


@dataclass
class Page:
    """One English page of the book: its document name (``book/01-rnn-limits``) and file."""

    docname: str
    path: Path

    @property
    def is_notebook(self) -> bool:
        return self.path.suffix == ".ipynb"


def pages(root: Path = REPO_ROOT) -> list[Page]:
    """The English book's pages in table-of-contents order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]
    found = []
    for name in names:
        for suffix in (".ipynb", ".md"):
            if (root / f"{name}{suffix}").is_file():
                found.append(Page(name, root / f"{name}{suffix}"))
                break
        else:
            raise FileNotFoundError(f"_toc.yml names {name}, but neither {name}.ipynb nor {name}.md exists")
    return found


def page_texts(page: Page) -> list[str]:
    """The page's prose: each markdown cell of a notebook, or the whole Markdown file."""
    if page.is_notebook:
        return [cell.source for cell in read_notebook(page.path).cells if cell.cell_type == "markdown"]
    return [page.path.read_text(encoding="utf-8")]


def site_messages(root: Path = REPO_ROOT) -> list[str]:
    """Words of the site that live in no page: the book's title, its author (the footer shows it) and
    the toc's part captions."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    captions = [part["caption"] for part in toc.get("parts", []) if part.get("caption")]
    return [config["title"], config["author"]] + captions


def written_answers(page: Page, root: Path = REPO_ROOT) -> list[tuple[str, str]]:
    """The model answer and the rubric of each written question (a cell graded by hand) of an exercise
    page, from the solution region of its instructor's notebook (``exercises/<NN-slug>/<slug>.ipynb`` ->
    ``solutions/<NN-slug>/<slug>.ipynb``), as ``(context, English)`` pairs; none for other pages.
    The review page shows them in the language of the class
    (:func:`autograder.instructor.review.instructor_texts`)."""
    from autograder.engine.plan import MANUAL, MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT, load_notebook_plan, split_solution

    parts = page.path.relative_to(root).parts
    source = Path(root, "solutions", *parts[1:])
    if not page.is_notebook or parts[0] != "exercises" or not source.is_file():
        return []
    found = []
    for cell in load_notebook_plan(source).cells:
        if cell.kind == MANUAL:
            model, rubric = split_solution(cell.source)
            found += [(context, text) for context, text in ((MODEL_ANSWER_CONTEXT, model), (RUBRIC_CONTEXT, rubric))
                      if text]
    return found


def messages(texts: list[str]) -> list[str]:
    """The distinct blocks to translate, in order of first appearance."""
    seen: dict[str, None] = {}
    for text in texts:
        for block in blocks(text):
            if needs_translation(block):
                seen.setdefault(block, None)
    return list(seen)
