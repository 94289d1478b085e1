"""The course repository as ``_config.yml`` names it: its GitHub slug, the ref links open, Colab links.

Read by the grading engine (a learner's ``validate`` names the current exercise by its Colab link)
and by the course tooling that rewrites links (:mod:`autograder.course.notebooks`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from autograder.core.files import REPO_ROOT, NotebookError

_BAD_REF = re.compile(r"^[-.]|\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]|[./]$|\.lock$|^@$")
_GITHUB_URL = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?")


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
        text = config_path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {config_path}: {error}") from error
    return _parsed_settings(config_path, text)


@functools.lru_cache(maxsize=16)
def _parsed_settings(config_path: Path, text: str) -> RepositorySettings:
    """:func:`repository_settings` of one text of ``_config.yml``, parsed once: rewriting a course's links
    asks for the settings once per cell (thousands of times), and YAML parsing costs milliseconds."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
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
