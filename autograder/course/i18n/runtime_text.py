"""What the code shows (figure text, widget labels, test messages): its strings, and the two catalogues that ship
with ``course_runtime``."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n.catalogues import catalogue_template, read_catalogue, write_catalogue
from autograder.course.i18n.code_values import Program, formatted_literal, string_value
from autograder.course.i18n.extract import LANGUAGE, pages
from autograder.engine.cells import parse_cell
from course_runtime.language import COURSE_ERRORS, GIVEN_CODE_ERRORS


#
# The code cells are the same in both languages; what they draw and say is translated in the kernel
# when it is shown (course_runtime/language.py), from two catalogues that ship with course_runtime.

RUNTIME_LOCALE_DIR = Path("course_runtime") / "locales" / LANGUAGE / "LC_MESSAGES"
PATTERN_FLAG = "course-pattern"      # an f-string: its {...} parts match any text
PRINT_FLAG = "course-print"          # what a cell prints: a Chinese kernel translates such a write
_DOMAINS = ("figures", "messages")
# Calls whose string arguments end up on a figure or a widget, and keywords that carry such strings.
_FIGURE_CALLS = {"set_title", "set_xlabel", "set_ylabel", "suptitle", "title", "xlabel", "ylabel", "text",
                 "annotate", "set_text", "legend", "figtext", "Label", "HTML", "HTMLMath", "Button",
                 "set_xticklabels", "set_yticklabels", "bar", "barh"}
_FIGURE_KEYWORDS = {"label", "title", "xlabel", "ylabel", "description", "tooltip", "placeholder",
                    "x_labels", "y_labels", "labels", "options", "desc"}
# Calls that name a slider after each keyword (``interact(f, temperature=(0.1, 2.0))``).
_SLIDER_CALLS = {"interact", "interactive", "interact_manual"}
_MESSAGE_KEYWORDS = {"hint", "mistakes", "reason"}      # reason: what forbid_shortcuts' refusal advises
# The checks of ``course_runtime.testing`` that name the value they check in their message, and the keyword
# that names it (``check_close(..., name="the parameters after 3 steps")`` -> "`the parameters after 3 steps`
# has the wrong values: ...", ``explain_errors(..., call="MiniLM loaded with ...")`` -> "MiniLM loaded with
# ... raised ..."): a label that is a phrase is translated where the message shows it.
_LABELLED_CHECKS = {"check_close": "name", "check_shape": "name", "check_tensor": "name", "check_answer": "name",
                    "explain_errors": "call"}
# Figure strings that the code computes rather than writes (plot_curves labels a curve by its history
# key, ``train_loss`` -> ``train loss``; a title's f-string chooses between "with" and "without").
_COMPUTED_FIGURE_STRINGS = [("train loss", False), ("val loss", False), ("with", False), ("without", False)]


def _joined(node: "ast.AST") -> list[tuple[str, bool]] | None:
    """The texts a sum of written-out strings can make, each piece a literal, an f-string or a choice
    between them (``f"the logits of {call}" + (" against GPT-2" if hf else "")``: two texts); None for
    any other expression."""
    import ast

    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _joined(node.left), _joined(node.right)
        if left is None or right is None:
            return None
        return [(_as_pattern(a, a_pattern or b_pattern, a_pattern) + _as_pattern(b, a_pattern or b_pattern, b_pattern),
                 a_pattern or b_pattern) for a, a_pattern in left for b, b_pattern in right]
    if isinstance(node, ast.IfExp):
        body, orelse = _joined(node.body), _joined(node.orelse)
        return None if body is None or orelse is None else body + orelse
    found = string_value(node)
    return None if found is None else [found]


def _as_pattern(text: str, pattern: bool, is_pattern: bool) -> str:
    """``text`` as a part of a pattern (its braces doubled) where it joins one and is not one itself."""
    return text.replace("{", "{{").replace("}", "}}") if pattern and not is_pattern else text


def _is_words(text: str) -> bool:
    """Words a reader sees (two letters or more outside math and placeholders), not an identifier
    (``train_loss``) or an address."""
    plain = re.sub(r"\$[^$]*\$|\{[^{}]*\}", " ", text)
    identifier = re.fullmatch(r"[A-Za-z_][\w.]*", text.strip()) and ("_" in text or "." in text)
    return re.search(r"[A-Za-z]{2,}", plain) is not None and not identifier and "://" not in text


def code_strings(sources: list[str], *, figures: bool,
                 raised: tuple[str, ...] = COURSE_ERRORS + GIVEN_CODE_ERRORS) -> list[tuple[str, bool]]:
    """The strings that code shows: on figures, widgets and progress bars (``figures=True``), or in test
    messages (``assert`` messages, the messages of a ``raise`` of the classes ``raised`` (those a Chinese kernel
    translates: ``course_runtime.language``'s ``COURSE_ERRORS`` and ``GIVEN_CODE_ERRORS``), ``hint=`` and ``mistakes=`` of the checks and
    ``forbid_shortcuts``' ``reason=``, and the ``name=`` labels of the checks and ``explain_errors``'
    ``call=`` that are phrases, not code: :func:`_is_code`, or English words: :func:`_label_words`).
    ``sources`` are read as one program (a page's cells): a string reaches a figure through the names
    it is bound to (:class:`Program`), and ``interact``'s keywords name its sliders."""
    import ast

    trees = [tree for tree in map(parse_cell, sources) if not isinstance(tree, SyntaxError)]
    program = Program(trees)
    found: dict[str, bool] = {}
    for tree in trees:
        for node in ast.walk(tree):
            candidates, labels, positional = [], [], set()
            if figures and isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in _FIGURE_CALLS:
                    candidates += node.args
                candidates += [k.value for k in node.keywords if k.arg in _FIGURE_KEYWORDS]
                if name in _SLIDER_CALLS:
                    candidates += [ast.Constant(k.arg) for k in node.keywords if k.arg]
            elif not figures:
                if isinstance(node, ast.Assert) and node.msg is not None:
                    candidates.append(node.msg)
                elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                    if getattr(node.exc.func, "id", "") in raised:
                        candidates.append(node.exc.args[0])
                elif isinstance(node, ast.Call):
                    candidates += [k.value for k in node.keywords if k.arg in _MESSAGE_KEYWORDS]
                    position = _message_positions().get(getattr(node.func, "attr", getattr(node.func, "id", "")))
                    if position is not None and position < len(node.args) and not any(
                            isinstance(a, ast.Starred) for a in node.args[:position + 1]):
                        candidates.append(node.args[position])   # explain_errors("use x.float()", ...)
                        positional.add(id(node.args[position]))
                    label = _LABELLED_CHECKS.get(getattr(node.func, "attr", getattr(node.func, "id", "")))
                    labels += [k.value for k in node.keywords if label and k.arg == label]
            # a table built in place (mistakes={hint: ... for m, hint in TABLE.items()}): its keys and values
            candidates = [part for c in candidates
                          for part in ([c.key, c.value] if isinstance(c, ast.DictComp) else [c])]
            for candidate, is_label in [(c, False) for c in candidates] + [(c, True) for c in labels]:
                # a label made of pieces is shown whole, and its value is looked up whole
                whole = (_joined(candidate) or []) if is_label else []
                # a hint added to a value it chose (``"sample with ..." + kept``) is one line, a pattern
                whole += [_summed(candidate)] if id(candidate) in positional and _summed(candidate) else []
                for text, is_pattern in whole + program.strings(candidate):
                    # a message is a phrase; a lone word in a test cell is a name or a key
                    if _is_words(text) and (figures or " " in text.strip()) and not (is_label and _is_code(text)):
                        found.setdefault(text, is_pattern)
                for text in _label_words(candidate, program) if is_label else []:
                    found.setdefault(text, False)
    return list(found.items())


@functools.lru_cache(maxsize=None)
def _message_positions() -> dict[str, int]:
    """The functions of ``course_runtime/testing.py`` that take a message (a parameter named in
    :data:`_MESSAGE_KEYWORDS`) by position, and where: ``{"explain_errors": 0}``. A test that passes its
    hint that way (``with explain_errors("convert x with x.float()", call=...)``) shows it as much as one
    that names it (issue 29: 26 such hints were never extracted)."""
    import ast

    tree = ast.parse((REPO_ROOT / "course_runtime" / "testing.py").read_text(encoding="utf-8"))
    positions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            for position, argument in enumerate(node.args.posonlyargs + node.args.args):
                if argument.arg in _MESSAGE_KEYWORDS:
                    positions[node.name] = position
    return positions


def printed_strings(sources: list[str]) -> list[tuple[str, bool]]:
    """What the code's ``print`` calls write, argument by argument as ``print`` writes them (``print("Answer
    recorded:", x)`` writes ``"Answer recorded:"``, then ``" "``, ``str(x)`` and ``"\\n"``): each argument that
    is a string literal, an f-string or a sum or choice of them, when it has words or its placeholders
    stand for words, and the strings its placeholders stand for (:class:`Program`). A Chinese kernel
    translates a write that is one of these whole (``course_runtime/language.py``); ``sources`` are the
    cells of one page."""
    import ast

    trees = [tree for tree in map(parse_cell, sources) if not isinstance(tree, SyntaxError)]
    program = Program(trees)
    found: dict[str, bool] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
                for argument in node.args:
                    # the words a placeholder stands for (``corpus = "the course's offline corpus"``) too
                    values = [text for value in ast.walk(argument) if isinstance(value, ast.FormattedValue)
                              and formatted_literal(value) is None for text in program.strings(value.value)]
                    worded = [(text, is_pattern) for text, is_pattern in values if _is_words(text)]
                    # a sum with a value that is no string (``"loss\n" + "".join(cells)``) is one pattern
                    summed = _summed(argument)
                    for text, is_pattern in _joined(argument) or ([summed] if summed else []):
                        # a line whose only words are its values' (``f"{name:16s} p = {p}"``) is matched whole
                        if _is_words(text) or (is_pattern and worded and re.sub(r"\{[^{}]*\}", "", text).strip()):
                            found.setdefault(text, is_pattern)
                    for text, is_pattern in worded:
                        found.setdefault(text, is_pattern)
    return list(found.items())


def _label_words(label: "ast.AST", program: Program) -> list[str]:
    """The single English words of a check's label that are prose: a word chosen instead of a phrase
    for a value the label formats (``phase = "prefill" if start == 0 else f"the chunk at ..."``,
    ``name=f"output of {phase}"``). A word in lower-case letters only. A label that is one word
    (``name="weights"``) is the learner's variable, shown as code (`` `weights` ``), and stays; so does a
    word a bare name stands for (``name=key`` over a checkpoint's keys)."""
    import ast

    words = []
    if isinstance(label, ast.JoinedStr) and not _is_code(string_value(label)[0]):
        for value in (v.value for v in label.values if isinstance(v, ast.FormattedValue)):
            for bound in program._values(value, set()) if isinstance(value, ast.Name) else []:
                if (isinstance(bound, ast.IfExp) and any(" " in text for branch in (bound.body, bound.orelse)
                                                          for text, _ in [string_value(branch) or ("", False)])):
                    words += [branch.value for branch in (bound.body, bound.orelse) if isinstance(branch, ast.Constant)]
    return [word for word in words if isinstance(word, str) and re.fullmatch(r"[a-z]{2,}", word)]


def _is_code(label: str) -> bool:
    """Whether a check's label is a Python expression a learner reads as code (``rope(x, positions)``,
    ``top_k_probs(probs, k={k})``), which stays as it is, rather than a phrase (``scores (batched)``,
    ``stable_softmax(large scores)``, ``output ({where})``), which is translated."""
    import ast

    expression = re.sub(r"\{[^{}]*\}", "x", label)
    try:
        ast.parse(expression, mode="eval")
    except SyntaxError:
        return False
    return re.search(r"\w \(", expression) is None


def grader_strings(source: str, parts: tuple[str, ...] | None = None, *,
                   instructor_errors: bool = False) -> list[tuple[str, bool]]:
    """The sentences a learner reads from one of the grader's modules (:data:`LEARNER_TEXT`): every
    string or f-string with a space and words in it, docstrings aside (and with ``instructor_errors``,
    ``raise UsageError(...)``: the command line of ``grade``), in the module-level functions, classes
    and assignments named ``parts`` (None: the whole module), with the strings of the names they format (a placeholder's
    value is translated in turn where it is shown). Strings added to other values are one sentence
    (:func:`_summed`): ``"no notebooks found (found " + names + ")"`` is the pattern
    ``"no notebooks found (found {names})"``."""
    import ast

    tree = ast.parse(source)
    program = Program([tree])
    chosen = [node for node in tree.body if parts is None or _defines(node) & set(parts)]
    docstrings = {id(node.value) for root in chosen for node in ast.walk(root)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    skipped = {id(v) for root in chosen for node in ast.walk(root)
               if isinstance(node, ast.JoinedStr) or (instructor_errors and _raises_usage_error(node))
               for v in ast.walk(node) if v is not node}
    found: dict[str, bool] = {}
    for root in chosen:
        for node in ast.walk(root):
            if id(node) in skipped:
                continue
            summed = _summed(node)
            if summed is not None:
                texts = [summed]
                skipped |= {id(v) for v in ast.walk(node)}
            elif id(node) in docstrings or string_value(node) is None:
                continue
            else:
                texts = program.strings(node)
            for text, is_pattern in texts:
                if " " in text.strip() and _is_words(text):
                    found.setdefault(text, is_pattern)
    return list(found.items())


def _raises_usage_error(node: "ast.AST") -> bool:
    """``raise UsageError(...)``: the command line's error, which the instructor reads."""
    import ast

    return (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", getattr(node.exc.func, "attr", "")) == "UsageError")


def _summed(node: "ast.AST") -> tuple[str, bool] | None:
    """A sum of strings and other values that holds a string and a value that is none (``"a " + b``)
    as one pattern, each value a placeholder; None for anything else."""
    import ast

    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    terms, pending = [], [node]
    while pending:
        term = pending.pop()
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Add):
            pending += [term.right, term.left]
        else:
            terms.append(term)
    pieces = [string_value(term) for term in terms]
    if all(piece is None for piece in pieces) or all(piece is not None for piece in pieces):
        return None
    # a value's braces (an f-string inside it) would end its placeholder early: they are shown as parentheses
    return "".join(("{" + ast.unparse(term).replace("{", "(").replace("}", ")") + "}") if piece is None
                   else piece[0] if piece[1]
                   else piece[0].replace("{", "{{").replace("}", "}}") for term, piece in zip(terms, pieces)), True


def _defines(node: "ast.AST") -> set[str]:
    """The names a module-level statement defines."""
    import ast

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


#: The grader's modules whose words a learner reads, and the parts of each that say them (None: all of
#: it): ``validate``'s report, the source check's flags and notes, the guard's sentence, what feedback
#: says of a hidden test (its verdict, and in place of its text), the notes of a notebook rebuilt on the
#: plan, why a submission was not graded.
LEARNER_TEXT = {
    "autograder/engine/validate.py": ("_missing_for_validate", "_validation_plan", "ALL_PASS", "NOT_READY", "_points",
                                      "_check", "_repaired_but_passing", "_error_line"),
    "autograder/engine/disclosure.py": None,
    "autograder/core/outcomes.py": ("Verdict",),
    "autograder/engine/referee.py": ("_written_words", "AuthorsWords"),
    "autograder/engine/policy.py": ("_ALLOWED_TEXT", "Violation", "_Checker", "judge_cells", "enforce"),
    "autograder/engine/plan.py": ("assemble", "_LearnerCells", "_planned_cell", "HIDDEN_NOTE"),
    "course_runtime/errors.py": None,
    "autograder/engine/pages.py": ("_TEXT",),
    "autograder/engine/grade_one.py": ("_wrong_notebook", "_not_submitted", "run_notebook", "_read_submitted"),
    # why a submission was not graded, on its page (the instructor's command-line errors aside)
    "autograder/engine/submissions.py": ("newest_attempts_first", "Catalogue", "collect_submissions", "_named"),
    "autograder/engine/batch.py": ("_plans", "_triage"),
    "autograder/engine/stop_reasons.py": None,
    "autograder/engine/preflight.py": ("checkout_problem", "preflight_fix"),
}
#: Of those, the modules whose ``raise UsageError(...)`` the instructor reads (``grade``'s command line),
#: not a learner (``validate``'s are the learner's).
_INSTRUCTOR_ERRORS = {"autograder/engine/submissions.py"}


def runtime_messages(root: Path = REPO_ROOT) -> dict[str, list]:
    """``{"figures": [...], "messages": [...], "printed": [...]}``: the (English, is_pattern) strings the code
    shows, and which of the messages are printed (their entries are flagged :data:`PRINT_FLAG`).

    Figures: the chapters' code cells (each page read as one program), ``course_runtime/viz.py`` and the
    library's training loop (its progress bar). Messages: ``course_runtime/testing.py``, the code cells
    of the released exercises (their visible tests only: hidden tests are not in the released
    notebooks, and their messages stay out of a package that learners install), what their cells
    print (:func:`runtime_prints`) and the grader's words a learner reads (:data:`LEARNER_TEXT`).
    """
    def module(relative: str) -> list[str]:
        path = root / relative
        return [path.read_text(encoding="utf-8")] if path.exists() else []

    figures: dict[str, bool] = {}
    for sources in _page_code(root, True) + _page_code(root, False) + [module("course_runtime/viz.py"),
                                                          module("transformer_core/train.py")]:
        for text, is_pattern in code_strings(sources, figures=True):
            figures.setdefault(text, is_pattern)
    messages: dict[str, bool] = {}
    stub = ['raise NotImplementedError("replace this line with your code")']
    # testing.py's own ValueError and TypeError tell a test's author that a check is misused: not translated
    for text, is_pattern in code_strings(module("course_runtime/testing.py"), figures=False, raised=COURSE_ERRORS):
        messages.setdefault(text, is_pattern)
    for sources in _page_code(root, False) + [stub]:
        for text, is_pattern in code_strings(sources, figures=False):
            messages.setdefault(text, is_pattern)
    printed = runtime_prints(root)
    for text, is_pattern in printed:
        messages.setdefault(text, is_pattern)
    for relative, parts in LEARNER_TEXT.items():
        for source in module(relative):
            for text, is_pattern in grader_strings(source, parts, instructor_errors=relative in _INSTRUCTOR_ERRORS):
                messages.setdefault(text, is_pattern)
    return {"figures": list(figures.items()) + _COMPUTED_FIGURE_STRINGS, "messages": list(messages.items()),
            "printed": [text for text, _ in printed]}


def _page_code(root: Path, chapters: bool) -> list[list[str]]:
    """The code cells of each chapter (``chapters``) or released exercise."""
    return [[cell.source for cell in read_notebook(page.path).cells if cell.cell_type == "code"]
            for page in pages(root) if page.is_notebook and page.docname.startswith("book/") == chapters]


def runtime_prints(root: Path = REPO_ROOT) -> list[tuple[str, bool]]:
    """The (English, is_pattern) strings the chapters' and the released exercises' cells print
    (:func:`printed_strings`): their entries of ``messages.po`` are flagged :data:`PRINT_FLAG`, the ones a
    Chinese kernel's output is matched against (the Chinese book's kernels and a learner's alike)."""
    found: dict[str, bool] = {}
    for sources in _page_code(root, True) + _page_code(root, False):
        for text, is_pattern in printed_strings(sources):
            found.setdefault(text, is_pattern)
    return list(found.items())


def runtime_catalogue_path(domain: str, root: Path = REPO_ROOT) -> Path:
    return root / RUNTIME_LOCALE_DIR / f"{domain}.po"


def update_runtime(root: Path = REPO_ROOT) -> None:
    """Merge the code's figure strings and test messages into ``course_runtime/locales`` (as
    :func:`update` does for the pages); an f-string's entry is flagged ``course-pattern``, a printed
    string's ``course-print``."""
    shown = runtime_messages(root)
    for domain in _DOMAINS:
        strings, flagged = shown[domain], _expected_flags(shown, domain)
        path = runtime_catalogue_path(domain, root)
        template = catalogue_template([text for text, _ in strings], f"<code: {domain}>")
        for text, flags in flagged.items():
            template[text].flags |= flags
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(template, update_header_comment=False)
            catalog.obsolete.clear()
            for message in catalog:            # the flags follow the code (a literal may become an f-string)
                if message.id and message.id in template:
                    message.flags -= {PATTERN_FLAG, PRINT_FLAG}
                    message.flags |= flagged.get(message.id, set())
        else:
            catalog = template
        write_catalogue(catalog, path)


def _expected_flags(shown: dict[str, list], domain: str) -> dict[str, set[str]]:
    """The code's flags of each string of ``domain`` (:func:`runtime_messages`' answer ``shown``)."""
    printed = set(shown.get("printed", [])) if domain == "messages" else set()
    flags = {text: ({PATTERN_FLAG} if is_pattern else set()) | ({PRINT_FLAG} if text in printed else set())
             for text, is_pattern in shown[domain]}
    return {text: found for text, found in flags.items() if found}


def runtime_drift(root: Path = REPO_ROOT) -> list[str]:
    """The runtime catalogues out of step with the code, one line each: strings the code shows that a
    catalogue lacks (``i18n update`` adds them), entries no code shows (``i18n update`` would drop
    them: a translation written by hand for a module :data:`LEARNER_TEXT` does not list is lost that way),
    and entries whose flags are not the code's (a printed string a kernel would not translate)."""
    found, code = [], runtime_messages(root)
    for domain in _DOMAINS:
        path = runtime_catalogue_path(domain, root)
        shown, expected = {text for text, _ in code[domain]}, _expected_flags(code, domain)
        held = {m.id: m.flags for m in read_catalogue(path) if m.id} if path.exists() else {}
        kept, relative = set(held), path.relative_to(root)
        if shown - kept:
            found.append(f"{relative}: {len(shown - kept)} strings the code shows are missing "
                         f"(run `python -m autograder i18n update`), e.g. {min(shown - kept)!r}")
        if kept - shown:
            found.append(f"{relative}: {len(kept - shown)} entries no code shows, which `i18n update` would "
                         f"drop (list their module in LEARNER_TEXT, or delete them), e.g. {min(kept - shown)!r}")
        flagged = sorted(text for text in shown & kept
                         if held[text] & {PATTERN_FLAG, PRINT_FLAG} != expected.get(text, set()))
        if flagged:
            found.append(f"{relative}: {len(flagged)} entries whose flags are not the code's "
                         f"(run `python -m autograder i18n update`), e.g. {flagged[0]!r}")
    return found


def runtime_status(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Counts of the runtime catalogues, as :func:`status` gives them for the pages."""
    counts = {}
    for domain in _DOMAINS:
        path = runtime_catalogue_path(domain, root)
        entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
        counts[f"course_runtime/{domain}"] = {
            "translated": sum(1 for m in entries if m.string and not m.fuzzy),
            "fuzzy": sum(1 for m in entries if m.fuzzy),
            "untranslated": sum(1 for m in entries if not m.string),
        }
    return counts
