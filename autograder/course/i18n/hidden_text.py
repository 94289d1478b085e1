"""7: the hidden tests' words, the grader's own catalogue.

What a hidden test's author wrote (the ``assert`` and ``raise`` messages, the ``name=`` and ``hint=`` of
its checks, :func:`autograder.engine.referee.hidden_words`) is what feedback says of a failed hidden check
(:func:`autograder.engine.disclosure.hidden_check_in`). Its translations cannot go into
``course_runtime``'s catalogues, which learners install with the course: they live in the grader's
:data:`autograder.engine.disclosure.HIDDEN_CATALOGUE`, one entry per text with the test cells that
write it as comments. A text that is one name (``answer_q1``, shown as code) or that the runtime
catalogue already holds (a visible test shows it too, maybe with other values) is not an entry.
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.core.files import REPO_ROOT, list_assignments, read_notebook
from autograder.course.i18n.catalogues import catalogue_template, read_catalogue, write_catalogue
from autograder.course.i18n.extract import LANGUAGE
from autograder.course.i18n.runtime_text import runtime_catalogue_path
from autograder.engine.disclosure import HIDDEN_CATALOGUE
from autograder.engine.referee import hidden_words

_NAME = re.compile(r"[A-Za-z_][\w.]*")
_PLACEHOLDER = re.compile(r"\{[^{}]+\}")


def hidden_catalogue_path(root: Path = REPO_ROOT) -> Path:
    """Where ``root``'s hidden catalogue is (:data:`autograder.engine.disclosure.HIDDEN_CATALOGUE`)."""
    relative = Path(str(HIDDEN_CATALOGUE).format(language=LANGUAGE)).relative_to(REPO_ROOT)
    return Path(root) / relative


def hidden_texts(root: Path = REPO_ROOT) -> dict[str, list[tuple[str, int, str]]]:
    """The words of every hidden region of ``root``'s solutions that need a translation of their own, each
    with the test cells that write it (notebook path, cell's number from 1, cell's id), in the course's order."""
    path = runtime_catalogue_path("messages", root)
    # as the referee reads an f-string: each placeholder of a runtime entry is "…"
    public = {_PLACEHOLDER.sub("…", m.id) for m in read_catalogue(path) if m.id} if path.exists() else set()
    found: dict[str, list[tuple[str, int, str]]] = {}
    for assignment in list_assignments(root):
        for notebook in sorted((Path(root) / "solutions" / assignment).glob("*.ipynb")):
            where = notebook.relative_to(root).as_posix()
            for number, cell in enumerate(read_notebook(notebook).cells, start=1):
                if cell.cell_type != "code":
                    continue
                for text in hidden_words(cell.source):
                    if not _NAME.fullmatch(text) and text not in public:
                        found.setdefault(text, []).append((where, number, cell.get("id", "?")))
    return found


def update_hidden(root: Path = REPO_ROOT) -> None:
    """Merge the hidden regions' words into the hidden catalogue (as ``i18n update`` does for the pages:
    a new text untranslated, a changed one fuzzy, a removed one dropped)."""
    texts, path = hidden_texts(root), hidden_catalogue_path(root)
    catalog = read_catalogue(path) if path.exists() else None
    # the old catalogue's date kept: an update that finds nothing new changes nothing
    template = catalogue_template(list(texts), "solutions (hidden tests)", catalog and catalog.creation_date)
    for text, cells in texts.items():
        template[text].locations = [(where, number) for where, number, _ in cells]
        template[text].auto_comments = [f"hidden test cell {cell_id}" for _, _, cell_id in cells]
    if catalog is not None:
        catalog.update(template, update_header_comment=False)
        catalog.obsolete.clear()
    else:
        catalog = template
    write_catalogue(catalog, path)


def hidden_problems(root: Path = REPO_ROOT, *, complete: bool = True) -> list[str]:
    """The hidden catalogue out of step with the solutions (texts it lacks, entries no hidden region
    writes) and, when ``complete``, its untranslated and outdated (fuzzy) entries, one line each."""
    path = hidden_catalogue_path(root)
    relative = path.relative_to(root)
    entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
    written, kept = set(hidden_texts(root)), {m.id for m in entries}
    found = []
    for extra, what in ((written - kept, "texts of hidden tests are missing (run `python -m autograder i18n update`)"),
                        (kept - written, "entries no hidden test writes, which `i18n update` would drop")):
        if extra:
            found.append(f"{relative}: {len(extra)} {what}, e.g. {min(extra)!r}")
    todo = [m.id for m in entries if not m.string or m.fuzzy]
    if complete and todo:
        found.append(f"{relative}: {len(todo)} untranslated or outdated (fuzzy) texts of hidden tests, "
                     f"e.g. {todo[0]!r}")
    return found
