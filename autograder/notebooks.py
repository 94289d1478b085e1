"""Notebook conventions: the normal form, the canonical setup cell and the Open-in-Colab badges.

Normal form (what ``python -m autograder normalize`` writes and ``--check`` enforces):

- nbformat 4.5, 1-space JSON indentation with sorted keys, one trailing newline;
- no outputs and no execution counts;
- notebook metadata reduced to ``kernelspec`` (python3), ``language_info`` (``{"name": "python"}``)
  and, when present, the book's ``mystnb``/``myst`` settings;
- cell metadata reduced to what the course uses: ``nbgrader``, ``tags``, ``deletable``,
  ``editable``, ``mystnb``, ``jupyter``;
- deterministic cell ids: an nbgrader cell's ``grade_id``, otherwise a short hash of the cell's
  type and source (so inserting a cell does not renumber the others), made unique in the notebook.

Cell sources are never changed, so nbgrader checksums stay valid; the one exception is
``normalize --repoint`` (:func:`repoint_all`), which a fork runs after changing the repository in
``_config.yml`` and ``release`` runs when it pins a tag, before regenerating the exercises.

Links to the repository: every link to the course repository in :func:`linked_paths` (Colab badges
and links, setup cells' ``pip install git+...@REF``, Binder, GitHub file links, install lines in
Markdown) opens the repository of ``_config.yml`` at its pinned ref, ``repository.release`` or else
``repository.branch``. :func:`rewrite_repository_links` is the one function that rewrites them;
:func:`repository_link_problems` lists the links that disagree with ``_config.yml``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_FOLDERS = ("book", "solutions", "exercises")
PACKAGE_NAME = "transformer-core"
COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python"}
KEPT_NOTEBOOK_METADATA = ("mystnb", "myst")
KEPT_CELL_METADATA = ("nbgrader", "tags", "deletable", "editable", "mystnb", "jupyter")
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^)\s\"'>]+")


class NotebookError(Exception):
    """A notebook cannot be read or does not follow the course's conventions."""


# --- Repository facts -----------------------------------------------------------------------------

# Documents outside book/, solutions/ and exercises/ that link to the repository or tell users how to
# install from it; `normalize --repoint` and `release` rewrite them too.
LINKED_DOCUMENTS = ("README.md", "ARCHITECTURE.md", "autograder/README.md", "site/README.md",
                    "benchmarks/README.md")
LINKED_SUFFIXES = (".ipynb", ".md")
_GITHUB_URL = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?")
_SLUG = r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?"
# A ref as it appears in a link: no path separator, quote, bracket or space, and no trailing dot
# (git forbids a ref ending in "."; a sentence may end right after a link).
_LINK_REF = r"""[^/\s?#"'`<>()\[\]\\]*[^/\s?#"'`<>()\[\]\\.]"""
_REF_END = r"""(?=[/?#"'`<>()\[\]\s\\]|$)"""
_SLUG_END = r"""(?=[/?#@"'`<>()\[\]\s\\,;:]|\.git|\.(?![\w-])|$)"""
_BAD_REF = re.compile(r"^[-.]|\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]|[./]$|\.lock$|^@$")


class ConfigError(NotebookError):
    """``_config.yml`` lacks a repository setting or holds a bad one; exit status 2."""


@dataclass(frozen=True)
class RepositoryRef:
    """A GitHub repository (``owner/name``) and the ref (branch, tag or commit) links to it open."""

    slug: str
    ref: str

    @property
    def url(self) -> str:
        """The repository's ``https://github.com/owner/name`` address."""
        return f"https://github.com/{self.slug}"


@dataclass(frozen=True)
class RepositorySettings:
    """The ``repository`` block of ``_config.yml``: the fork's address, its branch and the release.

    ``release`` (a tag or a commit) is what setup cells, Colab badges and file links pin; without it
    they follow ``branch``.
    """

    slug: str
    branch: str
    release: str | None

    @property
    def url(self) -> str:
        """The repository's ``https://github.com/owner/name`` address."""
        return f"https://github.com/{self.slug}"

    @property
    def pinned(self) -> RepositoryRef:
        """The repository at the ref every link must open: the release, else the branch."""
        return RepositoryRef(self.slug, self.release or self.branch)


def ref_problem(ref: str) -> str | None:
    """Say why ``ref`` cannot be a branch or tag name in links (``None`` if it can).

    Follows ``git check-ref-format``'s rules (no spaces, ``..``, ``~^:?*[\\``, ``@{``, leading ``-``
    or ``.``, trailing ``.``, ``/`` or ``.lock``).
    """
    if not ref:
        return "it is empty"
    if _BAD_REF.search(ref):
        return ("git does not accept it as a ref name (no spaces, '..', '~^:?*[\\', '@{', leading '-' "
                "or '.', trailing '.', '/' or '.lock')")
    return None


def _config_value(repository: dict, key: str, config_path: Path) -> str | None:
    value = repository.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{config_path}: repository.{key} is {value!r}, not text; quote it, e.g. "
                          f'{key}: "{value}"')
    problem = ref_problem(value) if key != "url" else None
    if problem:
        raise ConfigError(f"{config_path}: repository.{key} {value!r} is not a usable ref: {problem}")
    return value


def repository_settings(root: Path = REPO_ROOT) -> RepositorySettings:
    """Read the ``repository`` block of ``root``'s ``_config.yml``.

    Raises:
        ConfigError: if the file is missing or unreadable, ``repository.url`` is not a GitHub
            repository address, ``repository.branch`` is missing, or a ref is not valid.
    """
    config_path = Path(root) / "_config.yml"
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read {config_path}: {error}") from error
    repository = config.get("repository") if isinstance(config, dict) else None
    repository = repository if isinstance(repository, dict) else {}
    url = _config_value(repository, "url", config_path)
    branch = _config_value(repository, "branch", config_path)
    if not url or not branch:
        raise ConfigError(f"{config_path} must set repository.url (your fork, "
                          "https://github.com/OWNER/REPO) and repository.branch (e.g. main)")
    match = _GITHUB_URL.fullmatch(url.strip())
    if not match:
        raise ConfigError(f"{config_path}: repository.url {url!r} is not a GitHub repository address; "
                          "write it as https://github.com/OWNER/REPO (Colab opens notebooks from GitHub)")
    return RepositorySettings(match.group(1), branch, _config_value(repository, "release", config_path))


def repository_info(root: Path = REPO_ROOT) -> tuple[str, str]:
    """Return the GitHub repository URL and the ref links pin (``repository.release``, else the branch).

    Args:
        root: the repository root (the folder holding ``_config.yml``).

    Raises:
        ConfigError: see :func:`repository_settings`.
    """
    pinned = repository_settings(root).pinned
    return pinned.url, pinned.ref


def setup_cell_source(root: Path = REPO_ROOT) -> str:
    """Return the exact source of the setup cell every course notebook starts its code with.

    On Colab it installs the course library from the repository and ref (release, else branch)
    named in ``_config.yml``; everywhere it picks the device and prints what it found.

    Args:
        root: the repository root whose ``_config.yml`` names the repository and ref.
    """
    url, ref = repository_info(root)
    return (
        "# Setup: on Colab, install the course library; everywhere, pick a device.\n"
        "import sys\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "{PACKAGE_NAME} @ git+{url}@{ref}"\n'
        "from transformer_core.device import describe_device, pick_device\n"
        "device = pick_device()\n"
        "print(describe_device(device))"
    )


def colab_url(relative_path: str | Path, root: Path = REPO_ROOT) -> str:
    """Return the Colab address that opens a notebook of this repository at the pinned ref.

    Args:
        relative_path: the notebook's path from the repository root, e.g.
            ``"exercises/02-self-attention/self_attention.ipynb"``.
        root: the repository root whose ``_config.yml`` names the repository and ref.
    """
    pinned = repository_settings(root).pinned
    return (f"https://colab.research.google.com/github/{pinned.slug}/blob/{pinned.ref}/"
            f"{Path(relative_path).as_posix()}")


def colab_badge(relative_path: str | Path, root: Path = REPO_ROOT) -> str:
    """Return the Markdown of an Open-in-Colab badge for a notebook of this repository.

    Args:
        relative_path: the notebook's path from the repository root.
        root: the repository root whose ``_config.yml`` names the repository and ref.
    """
    return f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({colab_url(relative_path, root)})"


# --- Links to the repository ----------------------------------------------------------------------


def _link_pattern(slugs: Iterable[str], refs: Iterable[str] = ()) -> re.Pattern[str]:
    """The regular expression that finds every link to one of ``slugs`` in a text.

    Each match has exactly one group named ``s<N>`` (the ``owner/name``, matched without regard to
    case) and, for links that name a ref, one named ``r<N>``. ``refs`` are refs to recognise whole
    even when they contain ``/`` (a branch such as ``term/2026``); other refs end at the next ``/``.
    Forms: Colab (``/github/S/blob/R/``), Binder (``/v2/gh/S/R``), raw files, pip's
    ``git+https://github.com/S@R``, GitHub file and folder pages (``/blob|tree|raw|blame|commits/R``)
    and any other page of the repository (``github.com/S``, ``/issues``, ``.git``: slug only).
    """
    slug = "(?i:" + "|".join(re.escape(s) for s in sorted(set(slugs), key=len, reverse=True)) + ")"
    known = [re.escape(r) for r in sorted(set(refs), key=len, reverse=True) if "/" in r]
    ref = "(?:" + "|".join([*(k + _REF_END for k in known), _LINK_REF]) + ")"
    forms = [
        rf"https?://colab\.research\.google\.com/github/(?P<s1>{slug})/blob/(?P<r1>{ref})(?=/)",
        rf"https?://mybinder\.org/v2/gh/(?P<s2>{slug})/(?P<r2>{ref}){_REF_END}",
        rf"https?://raw\.githubusercontent\.com/(?P<s3>{slug})/(?P<r3>{ref})(?=/)",
        rf"git\+https?://(?:www\.)?github\.com/(?P<s4>{slug})(?:\.git)?@(?P<r4>{ref})",
        rf"https?://(?:www\.)?github\.com/(?P<s5>{slug})(?:\.git)?/(?:blob|tree|raw|blame|commits)/"
        rf"(?P<r5>{ref}){_REF_END}",
        rf"https?://(?:www\.)?github\.com/(?P<s6>{slug}){_SLUG_END}",
    ]
    return re.compile("|".join(f"(?:{form})" for form in forms))


def _link_parts(match: re.Match[str]) -> tuple[str, str | None]:
    """The ``(slug, ref)`` a link found by :func:`_link_pattern` names (ref ``None`` if it names none)."""
    found = {name[0]: value for name, value in match.groupdict().items() if value is not None}
    return found["s"], found.get("r")


def rewrite_repository_links(text: str, old: Iterable[RepositoryRef], new: RepositoryRef) -> str:
    """Point every link of ``text`` to one of the ``old`` repositories at ``new`` and its ref.

    This is the one place that rewrites links to the course repository; notebooks (cell by cell)
    and Markdown files go through it. Links that name a ref (Colab badges, Binder, pip's
    ``git+...@REF``, ``/blob/REF/`` file links) get ``new.ref``; others (``github.com/OWNER/REPO``,
    its issues, ``.git``) get the new repository only. Links to any other repository, and the text
    around links, are left as they are.

    Args:
        text: a Markdown text, cell source or any other text.
        old: the repositories (and their refs, used to recognise refs containing ``/``) to replace.
        new: the repository and ref to point at.
    """
    old = list(old)
    if not old:
        return text

    def replace(match: re.Match[str]) -> str:
        pieces, position = [], match.start()
        for name, value in match.groupdict().items():
            if value is not None:
                start, end = match.span(name)
                pieces += [match.string[position:start], new.slug if name[0] == "s" else new.ref]
                position = end
        return "".join(pieces) + match.string[position:match.end()]

    return _link_pattern([r.slug for r in old], [r.ref for r in old]).sub(replace, text)


_INSTALL_LINE = re.compile(rf"{re.escape(PACKAGE_NAME)}\s*@\s*git\+https?://(?:www\.)?github\.com/"
                           rf"({_SLUG})(?:\.git)?@({_LINK_REF})")


def linked_paths(root: Path = REPO_ROOT) -> list[Path]:
    """Every file whose links to the repository follow ``_config.yml``: the notebooks and Markdown
    files of ``book/``, ``solutions/`` and ``exercises/``, and :data:`LINKED_DOCUMENTS`."""
    root = Path(root)
    found = [p for folder in NOTEBOOK_FOLDERS if (root / folder).is_dir()
             for p in (root / folder).rglob("*")
             if p.suffix in LINKED_SUFFIXES and p.is_file() and ".ipynb_checkpoints" not in p.parts]
    found += [root / name for name in LINKED_DOCUMENTS if (root / name).is_file()]
    return sorted(found)


def course_repositories(root: Path = REPO_ROOT) -> list[RepositoryRef]:
    """The repositories the course's files currently present as the course's own.

    They are the one in ``_config.yml`` (at its branch and release) and every repository that an
    install line of the course library (``transformer-core @ git+https://github.com/OWNER/REPO@REF``,
    in every setup cell and in the install instructions) of :func:`linked_paths` names: after a fork
    changes ``_config.yml``, the files still name the repository they were copied from, which is how
    ``--repoint`` knows what to replace. Other repositories (nanoGPT, Hugging Face, PyTorch issues)
    never appear here, since nothing installs the course library from them.
    """
    settings = repository_settings(root)
    found = {RepositoryRef(settings.slug, settings.branch)}
    if settings.release:
        found.add(RepositoryRef(settings.slug, settings.release))
    for path in linked_paths(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        found.update(RepositoryRef(slug, ref) for slug, ref in _INSTALL_LINE.findall(text))
    return sorted(found, key=lambda r: (r.slug, r.ref))


@dataclass(frozen=True)
class RepositoryLink:
    """One link to a course repository found in a file (see :func:`repository_links`)."""

    path: str
    line: int
    text: str
    slug: str
    ref: str | None


def repository_links(root: Path = REPO_ROOT) -> list[RepositoryLink]:
    """Every link to a repository of :func:`course_repositories` in :func:`linked_paths`, in order.

    ``path`` is relative to ``root``; ``ref`` is None for links that name no ref (the repository's
    home page, its issues, a ``.git`` address).
    """
    root = Path(root)
    sources = course_repositories(root)
    pattern = _link_pattern([r.slug for r in sources], [r.ref for r in sources])
    links = []
    for path in linked_paths(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in pattern.finditer(text):
            slug, ref = _link_parts(match)
            links.append(RepositoryLink(path.relative_to(root).as_posix(), text.count("\n", 0, match.start()) + 1,
                                        match.group(0), slug, ref))
    return links


def repository_link_problems(root: Path = REPO_ROOT) -> list[str]:
    """List every link of :func:`repository_links` that ``_config.yml`` disagrees with: one to another
    repository, or naming a ref other than the pinned one (``repository.release``, else the branch).

    Returns:
        ``"<path>:<line>: <link> opens ..."`` lines, empty when every link follows ``_config.yml``.
    """
    pinned = repository_settings(root).pinned
    return [f"{link.path}:{link.line}: {link.text} opens {link.slug}@{link.ref or '(any ref)'}, "
            f"not {pinned.slug}@{pinned.ref} (_config.yml)"
            for link in repository_links(root) if link.slug != pinned.slug or link.ref not in (None, pinned.ref)]


def badge_target(path: Path, root: Path = REPO_ROOT) -> str:
    """Return the repository path a notebook's Colab badge must open.

    Book chapters open themselves; a solution or exercise notebook opens its ``exercises/`` copy,
    which is what learners work in.

    Raises:
        NotebookError: if ``path`` is not under ``book/``, ``solutions/`` or ``exercises/``.
    """
    relative = Path(path).resolve().relative_to(Path(root).resolve())
    if relative.parts[0] == "book":
        return relative.as_posix()
    if relative.parts[0] in ("solutions", "exercises") and len(relative.parts) == 3:
        return Path("exercises", *relative.parts[1:]).as_posix()
    raise NotebookError(f"{relative} is not a book chapter or an assignment notebook")


def notebook_paths(root: Path = REPO_ROOT, folders: Iterable[str] = NOTEBOOK_FOLDERS) -> list[Path]:
    """Return every notebook under the given folders of ``root``, sorted, skipping checkpoints."""
    found = []
    for folder in folders:
        base = Path(root) / folder
        if base.is_dir():
            found += [p for p in base.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)


# --- Normal form ----------------------------------------------------------------------------------


def _cell_id(cell: dict) -> str:
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    if grade_id:
        candidate = re.sub(r"[^a-zA-Z0-9_-]", "-", str(grade_id))[:64]
        if _CELL_ID.match(candidate):
            return candidate
    digest = hashlib.sha1((cell["cell_type"] + "\0" + cell["source"]).encode("utf-8")).hexdigest()
    return f"{cell['cell_type'][:2]}-{digest[:10]}"


def _unique(base: str, used: set[str]) -> str:
    candidate, n = base, 1
    while candidate in used:
        n += 1
        suffix = f"-{n}"
        candidate = base[: 64 - len(suffix)] + suffix
    used.add(candidate)
    return candidate


def normalize_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` in the course's normal form (see the module docstring).

    Args:
        nb: a notebook read with ``nbformat.read(..., as_version=4)``.
    """
    nb = copy.deepcopy(nb)
    metadata = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    for key in KEPT_NOTEBOOK_METADATA:
        if key in nb.metadata:
            metadata[key] = nb.metadata[key]
    cells = []
    used: set[str] = set()
    for cell in nb.cells:
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        new = {"cell_type": cell.cell_type, "metadata": {}, "source": source}
        for key in KEPT_CELL_METADATA:
            if key in cell.get("metadata", {}):
                new["metadata"][key] = cell.metadata[key]
        if cell.cell_type == "code":
            new["execution_count"] = None
            new["outputs"] = []
        elif "attachments" in cell and cell.cell_type in ("markdown", "raw"):
            new["attachments"] = cell.attachments
        new["id"] = _unique(_cell_id(new), used)
        cells.append(new)
    result = nbformat.from_dict({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})
    nbformat.validate(result)
    return result


def dumps_normalized(nb: nbformat.NotebookNode) -> str:
    """Return the normal-form text of a notebook (already normalised or not)."""
    return nbformat.writes(normalize_notebook(nb), version=4) + "\n"


def clean_text(text: object) -> str:
    """``text`` as a string that can be written as UTF-8: bytes that were not UTF-8 (surrogate
    escapes, as in file names) and other lone surrogates become U+FFFD."""
    text = str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


# The largest notebook file read; a bigger one is reported, not parsed.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read a notebook as nbformat 4.

    Raises:
        NotebookError: naming the file when it is too large, not valid JSON (nested too deeply
            included) or not a notebook.
    """
    try:
        size = Path(path).stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{path}: not a readable notebook (it is {size / 1024 ** 2:.0f} MiB; "
                                f"the limit is {MAX_NOTEBOOK_BYTES // 1024 ** 2} MiB)")
        return nbformat.read(str(path), as_version=4)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError) as error:
        raise NotebookError(f"{path}: not a readable notebook ({error})") from error
    except RecursionError:
        raise NotebookError(f"{path}: not a readable notebook (its JSON is nested too deeply)") from None
    except (KeyError, AttributeError, ValueError, TypeError, nbformat.ValidationError) as error:
        raise NotebookError(f"{path}: not a valid notebook ({error})") from error


SETUP_CELL_MARKER = "# Setup:"


def repoint_notebook(nb: nbformat.NotebookNode, root: Path = REPO_ROOT,
                     sources: Sequence[RepositoryRef] | None = None) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` whose setup cell and links to the repository follow ``_config.yml``.

    The first code cell is replaced by :func:`setup_cell_source` when it is a setup cell (its source
    starts with ``# Setup:``); every cell then goes through :func:`rewrite_repository_links`, so the
    Colab badge, the closing "Open the exercise in Colab" link and any GitHub link open the
    configured repository at its pinned ref. Nothing else changes.

    Args:
        nb: the notebook.
        root: the repository root.
        sources: the repositories to replace; default :func:`course_repositories` of ``root``.
    """
    nb = copy.deepcopy(nb)
    sources = course_repositories(root) if sources is None else sources
    pinned = repository_settings(root).pinned
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if code and code[0].source.lstrip().startswith(SETUP_CELL_MARKER):
        code[0].source = setup_cell_source(root)
    for cell in nb.cells:
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        rewritten = rewrite_repository_links(source, sources, pinned)
        if rewritten != source:
            cell.source = rewritten
    return nb


def _write_if_changed(path: Path, text: str, new_text: str, check: bool) -> bool:
    """Write ``new_text`` to ``path`` unless it equals ``text`` or ``check``; return ``text == new_text``."""
    if text == new_text:
        return True
    if not check:
        path.write_text(new_text, encoding="utf-8")
    return False


def repoint_text_file(path: Path, *, check: bool = False, root: Path = REPO_ROOT,
                      sources: Sequence[RepositoryRef] | None = None) -> bool:
    """Point the links to the repository in a Markdown (or other text) file at ``_config.yml``'s.

    Args:
        path: the file.
        check: if True, only report; never write.
        root: the repository root.
        sources: the repositories to replace; default :func:`course_repositories` of ``root``.

    Returns:
        True if the file already followed ``_config.yml``.
    """
    path = Path(path)
    sources = course_repositories(root) if sources is None else sources
    text = path.read_text(encoding="utf-8")
    new_text = rewrite_repository_links(text, sources, repository_settings(root).pinned)
    return _write_if_changed(path, text, new_text, check)


def normalize_file(path: Path, *, check: bool = False, repoint: bool = False, root: Path = REPO_ROOT,
                   sources: Sequence[RepositoryRef] | None = None) -> bool:
    """Put one notebook file into normal form.

    Args:
        path: the notebook.
        check: if True, only report; never write.
        repoint: also apply :func:`repoint_notebook` (setup cell and links from ``_config.yml``).
        root: the repository root (for ``repoint``).
        sources: for ``repoint``, the repositories to replace; default :func:`course_repositories`.

    Returns:
        True if the file was already in normal form.

    Raises:
        NotebookError: if the file cannot be read as a notebook.
    """
    path = Path(path)
    nb = read_notebook(path)
    if repoint:
        nb = repoint_notebook(nb, root, sources)
    return _write_if_changed(path, path.read_text(encoding="utf-8"), dumps_normalized(nb), check)


def repoint_all(root: Path = REPO_ROOT, *, check: bool = False) -> tuple[list[Path], list[str]]:
    """Run the repoint over every file of :func:`linked_paths`: notebooks through
    :func:`normalize_file` (so they also end in normal form), Markdown through :func:`repoint_text_file`.

    Returns:
        The files that changed (or, with ``check``, would change) and the error messages of the
        notebooks that could not be read.

    Raises:
        ConfigError: if ``_config.yml`` lacks or garbles a repository setting.
    """
    sources = course_repositories(root)
    changed, broken = [], []
    for path in linked_paths(root):
        try:
            if path.suffix == ".ipynb":
                same = normalize_file(path, check=check, repoint=True, root=root, sources=sources)
            else:
                same = repoint_text_file(path, check=check, root=root, sources=sources)
        except NotebookError as error:
            broken.append(str(error))
            continue
        if not same:
            changed.append(path)
    return changed, broken


def has_outputs(nb: nbformat.NotebookNode) -> bool:
    """Whether any code cell of ``nb`` carries outputs or an execution count."""
    return any(cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
               for cell in nb.cells)


def convention_problems(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """List how a course notebook breaks the setup-cell and badge conventions (empty if it does not).

    The first code cell must be exactly :func:`setup_cell_source`; the first Markdown cell must hold
    an Open-in-Colab badge opening :func:`badge_target`, and that file must exist.

    Args:
        path: a notebook under ``book/``, ``solutions/`` or ``exercises/`` of ``root``.
        root: the repository root.
    """
    nb = read_notebook(path)
    problems = []
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code:
        problems.append("it has no code cell, so no setup cell")
    elif code[0].source.rstrip("\n") != setup_cell_source(root):
        problems.append("its first code cell is not the canonical setup cell "
                        "(see autograder.notebooks.setup_cell_source())")
    markdown = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    target = badge_target(path, root)
    expected = colab_url(target, root)
    links = _COLAB_LINK.findall(markdown[0].source) if markdown else []
    if expected not in links:
        problems.append(f"its first Markdown cell lacks the Open-in-Colab badge {colab_badge(target, root)}")
    for link in links:
        linked = link.split("/blob/", 1)[-1].split("/", 1)[-1]
        if not (Path(root) / linked).is_file():
            problems.append(f"its Colab badge opens {linked}, which does not exist")
    return problems
