"""What the code shows (figure text, widget labels, test messages): its strings, and the two catalogues that ship
with ``course_runtime``."""

from __future__ import annotations

import re
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n.catalogues import catalogue_template, read_catalogue, write_catalogue
from autograder.course.i18n.extract import LANGUAGE, pages
from autograder.engine.cells import parse_cell


#
# The code cells are the same in both languages; what they draw and say is translated in the kernel
# when it is shown (course_runtime/language.py), from two catalogues that ship with course_runtime.

RUNTIME_LOCALE_DIR = Path("course_runtime") / "locales" / LANGUAGE / "LC_MESSAGES"
PATTERN_FLAG = "course-pattern"      # an f-string: its {...} parts match any text
# Calls whose string arguments end up on a figure or a widget, and keywords that carry such strings.
_FIGURE_CALLS = {"set_title", "set_xlabel", "set_ylabel", "suptitle", "title", "xlabel", "ylabel", "text",
                 "annotate", "set_text", "legend", "figtext", "Label", "HTML", "HTMLMath", "Button",
                 "set_xticklabels", "set_yticklabels"}
_FIGURE_KEYWORDS = {"label", "title", "xlabel", "ylabel", "description", "tooltip", "placeholder",
                    "x_labels", "y_labels", "labels", "options"}
_MESSAGE_KEYWORDS = {"hint", "mistakes"}
# Figure strings that the code computes rather than writes (plot_curves labels a curve by its history
# key, ``train_loss`` -> ``train loss``; a title's f-string chooses between "with" and "without").
_COMPUTED_FIGURE_STRINGS = [("train loss", False), ("val loss", False), ("with", False), ("without", False)]


def _string_value(node: "ast.AST") -> tuple[str, bool] | None:
    """A string literal as (text, False), an f-string as (pattern with {placeholders}, True)."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            else:
                spec = ""
                if value.format_spec is not None:
                    spec = ":" + "".join(str(v.value) for v in value.format_spec.values if isinstance(v, ast.Constant))
                conversion = "!" + chr(value.conversion) if value.conversion != -1 else ""
                parts.append("{" + ast.unparse(value.value) + conversion + spec + "}")
        return "".join(parts), True
    return None


def _strings_in(node: "ast.AST") -> list[tuple[str, bool]]:
    """The strings an expression can evaluate to: literals, f-strings, both sides of ``+`` and of
    ``a if c else b``, the items of lists, tuples and dicts (keys and values)."""
    import ast

    found = _string_value(node)
    if found:
        return [found]
    children = []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        children = [node.left, node.right]
    elif isinstance(node, ast.IfExp):
        children = [node.body, node.orelse]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        children = node.elts
    elif isinstance(node, ast.Dict):
        children = [k for k in node.keys if k is not None] + node.values
    elif isinstance(node, ast.ListComp):
        children = [node.elt]
    elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_with_hint" and node.args:
        children = [node.args[0]]
    return [s for child in children for s in _strings_in(child)]


def _is_words(text: str) -> bool:
    """Words a reader sees (two letters or more outside math and placeholders), not an identifier
    (``train_loss``) or an address."""
    plain = re.sub(r"\$[^$]*\$|\{[^{}]*\}", " ", text)
    identifier = re.fullmatch(r"[A-Za-z_][\w.]*", text.strip()) and ("_" in text or "." in text)
    return re.search(r"[A-Za-z]{2,}", plain) is not None and not identifier and "://" not in text


def code_strings(sources: list[str], *, figures: bool) -> list[tuple[str, bool]]:
    """The strings that code shows: on figures and widgets (``figures=True``), or in test messages
    (``assert`` messages, ``raise`` messages, ``hint=`` and ``mistakes=`` of the checks)."""
    import ast

    found: dict[str, bool] = {}
    for source in sources:
        tree = parse_cell(source)
        if isinstance(tree, SyntaxError):
            continue
        for node in ast.walk(tree):
            candidates = []
            if figures and isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in _FIGURE_CALLS:
                    candidates += node.args
                candidates += [k.value for k in node.keywords if k.arg in _FIGURE_KEYWORDS]
            elif not figures:
                if isinstance(node, ast.Assert) and node.msg is not None:
                    candidates.append(node.msg)
                elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                    if getattr(node.exc.func, "id", "") in ("AssertionError", "NotImplementedError", "ShortcutError"):
                        candidates.append(node.exc.args[0])
                elif isinstance(node, ast.Call):
                    candidates += [k.value for k in node.keywords if k.arg in _MESSAGE_KEYWORDS]
            for candidate in candidates:
                for text, is_pattern in _strings_in(candidate):
                    if _is_words(text):
                        found.setdefault(text, is_pattern)
    return list(found.items())


def runtime_messages(root: Path = REPO_ROOT) -> dict[str, list[tuple[str, bool]]]:
    """``{"figures": [...], "messages": [...]}``: the (English, is_pattern) strings the code shows.

    Figures: the chapters' code cells and ``course_runtime/viz.py``. Messages: ``course_runtime/testing.py``
    and the code cells of the released exercises (their visible tests only: hidden tests are not in
    the released notebooks, and their messages stay out of a package that learners install).
    """
    chapters = [cell.source for page in pages(root) if page.is_notebook and page.docname.startswith("book/")
                for cell in read_notebook(page.path).cells if cell.cell_type == "code"]
    exercises = [cell.source for page in pages(root) if page.is_notebook and not page.docname.startswith("book/")
                 for cell in read_notebook(page.path).cells if cell.cell_type == "code"]
    runtime = root / "course_runtime"
    viz = (runtime / "viz.py").read_text(encoding="utf-8") if (runtime / "viz.py").exists() else ""
    testing = (runtime / "testing.py").read_text(encoding="utf-8") if (runtime / "testing.py").exists() else ""
    stub = ['raise NotImplementedError("replace this line with your code")']
    return {"figures": code_strings(chapters + exercises + [viz], figures=True) + _COMPUTED_FIGURE_STRINGS,
            "messages": code_strings([testing] + exercises + stub, figures=False)}


def runtime_catalogue_path(domain: str, root: Path = REPO_ROOT) -> Path:
    return root / RUNTIME_LOCALE_DIR / f"{domain}.po"


def update_runtime(root: Path = REPO_ROOT) -> None:
    """Merge the code's figure strings and test messages into ``course_runtime/locales`` (as
    :func:`update` does for the pages); an f-string's entry is flagged ``course-pattern``."""
    for domain, strings in runtime_messages(root).items():
        path = runtime_catalogue_path(domain, root)
        template = catalogue_template([text for text, _ in strings], f"<code: {domain}>")
        for text, is_pattern in strings:
            if is_pattern:
                template[text].flags.add(PATTERN_FLAG)
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(template, update_header_comment=False)
            catalog.obsolete.clear()
            for message in catalog:            # the flag follows the code (a literal may become an f-string)
                if message.id and message.id in template:
                    message.flags.discard(PATTERN_FLAG)
                    message.flags |= template[message.id].flags & {PATTERN_FLAG}
        else:
            catalog = template
        write_catalogue(catalog, path)


def runtime_status(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Counts of the runtime catalogues, as :func:`status` gives them for the pages."""
    counts = {}
    for domain in ("figures", "messages"):
        path = runtime_catalogue_path(domain, root)
        entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
        counts[f"course_runtime/{domain}"] = {
            "translated": sum(1 for m in entries if m.string and not m.fuzzy),
            "fuzzy": sum(1 for m in entries if m.fuzzy),
            "untranslated": sum(1 for m in entries if not m.string),
        }
    return counts
