"""The Chinese edition built from the catalogues: ``zh/``'s pages, its table of contents and configuration, the
Chinese site, and the checks that the edition is complete and current."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.repository import colab_url
from autograder.course.i18n.catalogues import (catalogue_path, catalogue_template, markup_problems, read_catalogue,
                                               translate_text, translations, write_catalogue)
from autograder.course.i18n.comment_text import COMMENT_CONTEXT, page_comments, translate_cell, without_comments
from autograder.course.i18n.docstring_text import (DOCSTRING_CONTEXT, solution_docstrings, test_docstrings,
                                                   translate_docstrings, without_docstrings)
from autograder.course.i18n.extract import (COLAB_PATH, LANGUAGE, SITE_DOC, ZH_ROOT, messages, page_texts, pages,
                                            site_messages, written_answers)
from autograder.course.i18n.hidden_text import hidden_problems, update_hidden
from autograder.course.i18n.reader_checks import literal_emphasis, reader_problems
from autograder.course.i18n.runtime_text import (PATTERN_FLAG, PRINT_FLAG, runtime_catalogue_path, runtime_drift,
                                                  runtime_status, update_runtime)
from autograder.course.i18n.typesetting import MATH_CONTEXT, math_phrases
from autograder.course.notebooks import dumps_normalized, repoint_notebook, setup_cell_source


def update(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Re-extract the English messages and merge them into every catalogue (creating missing ones).

    Returns:
        ``{docname: {"translated": n, "fuzzy": n, "untranslated": n}}``.
    """
    documents = {page.docname: (messages(page_texts(page)), page.path.relative_to(root).as_posix(),
                                math_phrases("\n\n".join(page_texts(page))), solution_docstrings(page),
                                test_docstrings(page), page_comments(page), written_answers(page, root))
                 for page in pages(root)}
    documents[SITE_DOC] = (site_messages(root), "_config.yml + _toc.yml", [], [], [], [], [])
    for docname, (msgids, location, math, docs, helpers, comments, written) in documents.items():
        path = catalogue_path(docname, root)
        extra = {"math": math, "docstrings": docs, "test_docstrings": helpers, "comments": comments,
                 "written": written}
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(catalogue_template(msgids, location, catalog.creation_date, **extra),
                           update_header_comment=False)
            catalog.obsolete.clear()          # a removed paragraph's translation is dropped, not kept
        else:
            catalog = catalogue_template(msgids, location, **extra)
        write_catalogue(catalog, path)
    update_runtime(root)
    update_hidden(root)            # after the runtime catalogue: a text a visible test shows too is not hidden
    return status(root)


def status(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Count translated, fuzzy and untranslated messages per catalogue."""
    counts = {}
    for page_name in [p.docname for p in pages(root)] + [SITE_DOC]:
        path = catalogue_path(page_name, root)
        entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
        counts[page_name] = {
            "translated": sum(1 for m in entries if m.string and not m.fuzzy),
            "fuzzy": sum(1 for m in entries if m.fuzzy),
            "untranslated": sum(1 for m in entries if not m.string),
        }
    return counts | runtime_status(root)


def _zh_links(text: str, root: Path) -> str:
    """Point Colab links at the Chinese notebooks (``zh/<path>``), which exist for every page."""
    def swap(match: re.Match) -> str:
        path = match.group(2)
        return match.group(0) if path.startswith(f"{ZH_ROOT}/") else colab_url(f"{ZH_ROOT}/{path}", root)
    return COLAB_PATH.sub(swap, text)


def rendered(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Every file of the Chinese book (under ``zh/``) and its content, from the English pages and the
    catalogues: markdown translated block by block (untranslated blocks stay English), code copied
    with the docstrings (the learner's functions and classes, the visible tests' helpers) and the comments
    translated."""
    files = {}
    for page in pages(root):
        table = translations(page.docname, root)
        math = translations(page.docname, root, context=MATH_CONTEXT)
        docs = translations(page.docname, root, context=DOCSTRING_CONTEXT)
        notes = translations(page.docname, root, context=COMMENT_CONTEXT)
        target = root / ZH_ROOT / page.path.relative_to(root)
        if page.is_notebook:
            nb = copy.deepcopy(read_notebook(page.path))
            nb.metadata["course"] = {"language": LANGUAGE}
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = _zh_links(translate_text(cell.source, table, math, notes), root)
                elif cell.cell_type == "code":
                    cell.source = translate_cell(cell, notes)
                    cell.source = translate_docstrings(cell.source, docs) if docs else cell.source
            files[target] = dumps_normalized(repoint_notebook(nb, root))   # the setup cell says Chinese
        else:
            files[target] = _zh_links(translate_text(page.path.read_text(encoding="utf-8"), table, math, notes), root)
    files[root / ZH_ROOT / "_toc.yml"] = _zh_toc(root)
    files[root / ZH_ROOT / "_config.yml"] = _zh_config(root)
    return files


def build(root: Path = REPO_ROOT) -> list[Path]:
    """Write the Chinese book under ``zh/``; return the files that changed."""
    written = []
    for path, content in rendered(root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            written.append(path)
    return written


def stale_outputs(root: Path = REPO_ROOT) -> list[Path]:
    """Files of ``zh/`` that differ from what :func:`build` would write (or are missing)."""
    return [path for path, content in rendered(root).items()
            if not path.exists() or path.read_text(encoding="utf-8") != content]


def _zh_toc(root: Path) -> str:
    import yaml

    table = translations(SITE_DOC, root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        if part.get("caption"):
            part["caption"] = table.get(part["caption"], part["caption"])
    header = "# Generated by `python -m autograder i18n build` from ../_toc.yml: edit that file instead.\n"
    return header + yaml.safe_dump(toc, allow_unicode=True, sort_keys=False)


# The theme's interface in Chinese. Sphinx's own zh_CN catalogue translates most words ("搜索"); the
# rest comes from site/locale/zh_CN/LC_MESSAGES/sphinx.po (words it lacks: "Link to this heading"),
# the toggle button's and myst-nb's own settings, and course_site's replacements for myst-nb's {type}.
ZH_SPHINX_CONFIG = {
    "language": LANGUAGE,
    # A citation is a superscript number, as Chinese textbooks cite (GB/T 7714's numbered system), not
    # "(Vaswani et al., 2017)" in half-width parentheses inside a Chinese sentence (issue 29, seventh review).
    "bibtex_reference_style": "super",
    "bibtex_default_style": "unsrt",
    "locale_dirs": ["../site/locale"],
    "togglebutton_hint": "点击显示",
    "togglebutton_hint_hide": "点击隐藏",
    "nb_code_prompt_show": "显示{type}",
    "nb_code_prompt_hide": "隐藏{type}",
    "course_site_body_replacements": {"显示source": "显示代码", "隐藏source": "隐藏代码",
                                      "显示outputs": "显示输出", "隐藏outputs": "隐藏输出",
                                      "显示output": "显示输出", "隐藏output": "隐藏输出",
                                      "显示content": "显示代码与输出", "隐藏content": "隐藏代码与输出"},
}


def _zh_config(root: Path) -> str:
    """The English ``_config.yml`` with the Chinese title, author, language and paths that reach back to the
    shared files (bibliography, static files, the site extension); the execution cache is set by
    :func:`build_html`."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    site = translations(SITE_DOC, root)
    config["title"] = site.get(config["title"], config["title"])
    config["author"] = site.get(config["author"], config["author"])
    config["bibtex_bibfiles"] = ["../" + p for p in config.get("bibtex_bibfiles", [])]
    config["html"]["favicon"] = "../" + config["html"]["favicon"]
    config["repository"]["path_to_book"] = ZH_ROOT
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {name: "../" + path for name, path in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = ["../" + p for p in sphinx["config"]["html_static_path"]]
    sphinx["config"].update(ZH_SPHINX_CONFIG)
    header = "# Generated by `python -m autograder i18n build` from ../_config.yml: edit that file instead.\n"
    return header + yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def execution_cache(out: Path, root: Path = REPO_ROOT) -> Path:
    """The Chinese build's own jupyter-cache, ``<out>/_build/.jupyter_cache_zh-<key>``.

    The Chinese pages run the same code as the English ones, but in a kernel that draws figure text
    and widget labels and prints in Chinese (``$COURSE_LANGUAGE``), so their outputs are cached apart.
    The key is a hash of what decides those outputs besides the code (the figure catalogue, the printed
    entries of the messages catalogue and ``course_runtime/language.py``): a changed translation
    re-executes the chapters once, and an unchanged one hits the cache, as the English build does. A
    test message's translation is not part of it: no chapter's output shows one.
    """
    import hashlib

    digest = hashlib.sha256()
    for path in (runtime_catalogue_path("figures", root), root / "course_runtime" / "language.py"):
        digest.update(path.read_bytes() if path.exists() else b"")
    messages_po = runtime_catalogue_path("messages", root)
    printed = sorted((m.id, m.string, m.fuzzy, PATTERN_FLAG in m.flags) for m in
                     (read_catalogue(messages_po) if messages_po.exists() else []) if m.id and PRINT_FLAG in m.flags)
    digest.update(repr(printed).encode("utf-8"))
    return Path(out).resolve() / "_build" / f".jupyter_cache_zh-{digest.hexdigest()[:12]}"


BUILD_STAMP = Path("_build") / "book-inputs.sha256"
NOT_BOOK_INPUTS = ("tests", "benchmarks", ".ci")      # top-level folders no page is built from


def book_inputs_key(root: Path = REPO_ROOT) -> str:
    """A hash of what the two sites are built from: the path and bytes of every file git tracks or would
    track (untracked files that are not ignored), except :data:`NOT_BOOK_INPUTS`.

    :func:`build_html` writes it to ``<out>/`` :data:`BUILD_STAMP` once both sites are built, so a later
    consumer (``tests/test_book.py``) can tell a current build from a stale one by content, not by time.
    """
    import hashlib

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode("utf-8")
    digest = hashlib.sha256()
    for name in sorted(set(listed.split("\0")) - {""}):
        path = root / name
        if name.split("/")[0] not in NOT_BOOK_INPUTS and path.is_file():    # a deleted file stays listed
            digest.update(name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _kernel_profile(folder: Path) -> Path:
    """An IPython profile whose kernels load :mod:`course_runtime.language` (``IPYTHONDIR``)."""
    profile = folder / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(
        "# Written by autograder/course/i18n/edition.py: the Chinese book's figures, widgets and messages in Chinese.\n"
        "c.InteractiveShellApp.extensions = ['course_runtime.language']\n", encoding="utf-8")
    return folder


def english_heading_ids(html: Path, root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """``{docname: [section ids in page order]}`` of the built English pages under ``html``."""
    table = {}
    for page in pages(root):
        built = Path(html) / f"{page.docname}.html"
        if built.exists():
            table[page.docname] = re.findall(r'<section\b[^>]*?\bid="([^"]+)"', built.read_text(encoding="utf-8"))
    return table


def kernel_environment(out: Path, root: Path = REPO_ROOT) -> dict[str, str]:
    """The variables a Chinese chapter's kernel gets: ``COURSE_LANGUAGE``, the CJK font of the site assets
    under ``<out>/_build/site-assets`` (fetched if missing) in ``COURSE_CJK_FONT``, and an ``IPYTHONDIR``
    whose profile loads :mod:`course_runtime.language`."""
    sys.path.insert(0, str(root / "site"))
    import fetch_assets  # noqa: E402  (site/ is not a package)

    out = Path(out).resolve()
    assets = fetch_assets.ensure_assets(out / "_build" / "site-assets", quiet=True)
    return {"COURSE_LANGUAGE": LANGUAGE, "COURSE_CJK_FONT": str(fetch_assets.cjk_font(assets)),
            "IPYTHONDIR": str(_kernel_profile(out / "_build" / "zh-ipython"))}


def build_html(out: Path, root: Path = REPO_ROOT, *, extra_args: tuple[str, ...] = (),
               inputs: str | None = None) -> subprocess.CompletedProcess:
    """Build the Chinese site into ``<out>/_build/html/zh`` next to the English one in ``<out>/_build/html``.

    Built after the English site, whose section ids the Chinese headings take (``#anchor`` links
    work in both languages). The chapters are executed in kernels that show figures, widget labels
    and messages in Chinese (``$COURSE_LANGUAGE=zh_CN``, the extension :mod:`course_runtime.language`
    loaded through ``$IPYTHONDIR``, the CJK font from the site assets in ``$COURSE_CJK_FONT``), with
    their own execution cache (:func:`execution_cache`). The code cells are the English ones.

    On success it writes ``inputs`` (default: :func:`book_inputs_key` as the files are when it starts; a
    caller that built the English site first passes the key it took before that) to ``<out>/`` :data:`BUILD_STAMP`.

    Returns:
        The finished ``jupyter-book build`` process (its return code and output).
    """
    import json
    import os

    import yaml

    out = Path(out).resolve()
    inputs = inputs or book_inputs_key(root)    # before the build: a file edited during it makes the stamp stale
    (out / BUILD_STAMP).unlink(missing_ok=True)
    config = yaml.safe_load((root / ZH_ROOT / "_config.yml").read_text(encoding="utf-8"))
    cache = execution_cache(out, root)
    for old in (out / "_build").glob(".jupyter_cache_zh-*"):
        if old != cache:
            shutil.rmtree(old, ignore_errors=True)
    config["execute"]["cache"] = str(cache)
    # The configuration is read from a temporary folder: paths that reach back into the repository
    # must not depend on where it lies.
    book = (root / ZH_ROOT).resolve()
    config["bibtex_bibfiles"] = [str((book / p).resolve()) for p in config["bibtex_bibfiles"]]
    config["html"]["favicon"] = str((book / config["html"]["favicon"]).resolve())
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {n: str((book / p).resolve()) for n, p in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = [str((book / p).resolve()) for p in sphinx["config"]["html_static_path"]]
    # Sphinx compiles site/locale's sphinx.po into a .mo beside it: a copy under _build keeps it out of the tree.
    locale = out / "_build" / "zh-locale"
    shutil.rmtree(locale, ignore_errors=True)
    shutil.copytree((book / sphinx["config"]["locale_dirs"][0]).resolve(), locale)
    sphinx["config"]["locale_dirs"] = [str(locale)]
    ids = out / "_build" / "zh-heading-ids.json"
    ids.write_text(json.dumps(english_heading_ids(out / "_build" / "html", root), indent=1), encoding="utf-8")
    sphinx["config"]["course_site_heading_ids"] = str(ids)
    env = dict(os.environ, **kernel_environment(out, root))
    with tempfile.TemporaryDirectory(prefix="zh-book-") as tmp:
        config_path = Path(tmp) / "_config.yml"
        config_path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
        jupyter_book = Path(sys.executable).with_name("jupyter-book")
        done = subprocess.run([str(jupyter_book), "build", str(root / ZH_ROOT), "--config", str(config_path),
                               "--path-output", str(out / "_build" / "zh-book"), *extra_args],
                              capture_output=True, text=True, env=env)
    if done.returncode == 0:
        target = out / "_build" / "html" / "zh"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(out / "_build" / "zh-book" / "_build" / "html", target)
        (out / BUILD_STAMP).write_text(inputs + "\n", encoding="utf-8")
    return done


def code_cells_match(root: Path = REPO_ROOT) -> list[str]:
    """Pages whose Chinese notebook's code cells differ from the English ones (should be none),
    the text of their docstrings and comments (translated) left out of the comparison."""
    problems = []
    for page in pages(root):
        if not page.is_notebook:
            continue
        target = root / ZH_ROOT / page.path.relative_to(root)
        if not target.exists():
            problems.append(f"{target.relative_to(root)} is missing")
            continue
        english = [(c.cell_type, c.source) for c in read_notebook(page.path).cells if c.cell_type != "markdown"]
        chinese = [(c.cell_type, c.source) for c in read_notebook(target).cells if c.cell_type != "markdown"]
        zh_setup = setup_cell_source(root, LANGUAGE)     # the one line the editions' code may differ in
        chinese = [(kind, setup_cell_source(root) if source == zh_setup else source) for kind, source in chinese]
        def code(cells):
            return [(kind, without_comments(without_docstrings(source))) for kind, source in cells]
        if code(english) != code(chinese):
            problems.append(f"{target.relative_to(root)}: its code cells differ from {page.path.relative_to(root)}")
    return problems


def markup_report(docname: str, root: Path = REPO_ROOT) -> list[str]:
    """Translations of one page that lost or changed markup (:func:`markup_problems`), and bold markers that
    either edition's block shows as characters (:func:`literal_emphasis`), one line each."""
    path = catalogue_path(docname, root)
    report = []
    for message in (read_catalogue(path) if path.exists() else []):
        if not message.id:
            continue
        first_line = message.id.splitlines()[0][:60]
        markdown = message.context not in (COMMENT_CONTEXT, DOCSTRING_CONTEXT, MATH_CONTEXT)
        if markdown:
            report += [f"{path.relative_to(root)}: the English {first_line!r}...: {problem}"
                       for problem in literal_emphasis(message.id, root)]
        if message.string and not message.fuzzy:
            lost = markup_problems(message.id, message.string) + (literal_emphasis(message.string, root) if markdown
                                                                  else [])
            if lost:
                report.append(f"{path.relative_to(root)}: the translation of {first_line!r}...: {'; '.join(lost)}")
    return report


def problems(root: Path = REPO_ROOT, *, complete: bool = True) -> list[str]:
    """Everything that keeps the Chinese edition from matching the English one, one line each.

    Args:
        complete: also report untranslated and outdated (fuzzy) paragraphs.
    """
    found = []
    for docname, counts in status(root).items():
        runtime = docname.startswith("course_runtime/")
        path = runtime_catalogue_path(docname.split("/")[-1], root) if runtime else catalogue_path(docname, root)
        if complete and (counts["fuzzy"] or counts["untranslated"]):
            found.append(f"{path.relative_to(root)}: {counts['untranslated']} untranslated "
                         f"and {counts['fuzzy']} outdated (fuzzy) {'messages' if runtime else 'paragraphs'}")
        if not runtime:
            found += markup_report(docname, root)
    return (found + runtime_drift(root) + hidden_problems(root, complete=complete) + code_cells_match(root)
            + (reader_problems(root) if complete else []))


def stale_entries(docname: str, root: Path = REPO_ROOT) -> list[dict]:
    """The outdated messages of one page: what the English said, what it says now, the old translation."""
    path = catalogue_path(docname, root)
    return [{"now": m.id, "was": m.previous_id[0] if m.previous_id else "", "translation": m.string}
            for m in read_catalogue(path) if m.id and m.fuzzy] if path.exists() else []


def dump_status(counts: dict[str, dict[str, int]]) -> str:
    """A table of the catalogues' state."""
    lines = [f"{'page':<48} {'done':>5} {'fuzzy':>6} {'todo':>5}"]
    for docname, c in counts.items():
        lines.append(f"{docname:<48} {c['translated']:>5} {c['fuzzy']:>6} {c['untranslated']:>5}")
    return "\n".join(lines)
