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
``normalize --repoint`` (:func:`repoint_notebook`), which a fork runs once after changing the
repository in ``_config.yml``, before regenerating the exercises.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable
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


def repository_info(root: Path = REPO_ROOT) -> tuple[str, str]:
    """Return the GitHub repository URL and branch named in ``_config.yml``.

    Args:
        root: the repository root (the folder holding ``_config.yml``).

    Raises:
        NotebookError: if ``_config.yml`` lacks ``repository.url`` or ``repository.branch``.
    """
    config_path = Path(root) / "_config.yml"
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except OSError as error:
        raise NotebookError(f"cannot read {config_path}: {error}") from error
    repository = config.get("repository") or {}
    url, branch = repository.get("url"), repository.get("branch")
    if not url or not branch:
        raise NotebookError(f"{config_path} must set repository.url and repository.branch")
    return str(url).rstrip("/").removesuffix(".git"), str(branch)


def setup_cell_source(root: Path = REPO_ROOT) -> str:
    """Return the exact source of the setup cell every course notebook starts its code with.

    On Colab it installs the course library from the repository named in ``_config.yml``;
    everywhere it picks the device and prints what it found.

    Args:
        root: the repository root whose ``_config.yml`` names the repository and branch.
    """
    url, branch = repository_info(root)
    return (
        "# Setup: on Colab, install the course library; everywhere, pick a device.\n"
        "import sys\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "{PACKAGE_NAME} @ git+{url}@{branch}"\n'
        "from transformer_core.device import describe_device, pick_device\n"
        "device = pick_device()\n"
        "print(describe_device(device))"
    )


def colab_url(relative_path: str | Path, root: Path = REPO_ROOT) -> str:
    """Return the Colab address that opens a notebook of this repository.

    Args:
        relative_path: the notebook's path from the repository root, e.g.
            ``"exercises/02-self-attention/self_attention.ipynb"``.
        root: the repository root whose ``_config.yml`` names the repository and branch.
    """
    url, branch = repository_info(root)
    slug = url.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{slug}/blob/{branch}/{Path(relative_path).as_posix()}"


def colab_badge(relative_path: str | Path, root: Path = REPO_ROOT) -> str:
    """Return the Markdown of an Open-in-Colab badge for a notebook of this repository.

    Args:
        relative_path: the notebook's path from the repository root.
        root: the repository root whose ``_config.yml`` names the repository and branch.
    """
    return f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({colab_url(relative_path, root)})"


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


def repoint_notebook(nb: nbformat.NotebookNode, path: Path, root: Path = REPO_ROOT) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` whose setup cell and Colab badge follow ``root``'s ``_config.yml``.

    The first code cell is replaced by :func:`setup_cell_source` when it is a setup cell (its source
    starts with ``# Setup:``); every Colab link in the first Markdown cell is pointed at
    :func:`colab_url` of :func:`badge_target`. Nothing else changes.

    Args:
        nb: the notebook.
        path: where it lives (decides what its badge opens).
        root: the repository root.
    """
    nb = copy.deepcopy(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if code and code[0].source.lstrip().startswith(SETUP_CELL_MARKER):
        code[0].source = setup_cell_source(root)
    markdown = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    if markdown:
        target = colab_url(badge_target(path, root), root)
        markdown[0].source = _COLAB_LINK.sub(target, markdown[0].source)
    return nb


def normalize_file(path: Path, *, check: bool = False, repoint: bool = False, root: Path = REPO_ROOT) -> bool:
    """Put one notebook file into normal form.

    Args:
        path: the notebook.
        check: if True, only report; never write.
        repoint: also apply :func:`repoint_notebook` (setup cell and badge from ``_config.yml``).
        root: the repository root (for ``repoint``).

    Returns:
        True if the file was already in normal form.

    Raises:
        NotebookError: if the file cannot be read as a notebook.
    """
    path = Path(path)
    nb = read_notebook(path)
    if repoint:
        nb = repoint_notebook(nb, path, root)
    normal = dumps_normalized(nb)
    text = path.read_text(encoding="utf-8")
    if text == normal:
        return True
    if not check:
        path.write_text(normal, encoding="utf-8")
    return False


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
