"""Links to the course repository follow _config.yml: `normalize --repoint` after a fork, and
`python -m autograder release TAG` pinning a term to a tag (autograder/README.md, "Cutting a release
for your term")."""

import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.__main__ import main
from autograder.core.files import REPO_ROOT
from autograder.core.repository import ConfigError, RepositoryRef, repository_settings
from autograder.course.notebooks import (convention_problems, course_repositories, linked_paths,
                                         repository_link_problems, repository_links, rewrite_repository_links)
from autograder.course.release import generate, release_commands, set_release

UPSTREAM = "transformer-course/transformer-core-mechanisms"
FORK = "someone/fork-of-the-course"
FORK_BRANCH = "term-2026"
TAG = "v2026.1"
CHECKED = ("book", "solutions", "exercises", "README.md")
FIXTURE = Path(__file__).parent / "fixtures" / "course"


# --- rewrite_repository_links ---------------------------------------------------------------------

OLD = [RepositoryRef(UPSTREAM, "main")]
NEW = RepositoryRef(FORK, TAG)


@pytest.mark.parametrize("before, after", [
    (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research."
     f"google.com/github/{UPSTREAM}/blob/main/book/01-rnn-limits.ipynb)",
     f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research."
     f"google.com/github/{FORK}/blob/{TAG}/book/01-rnn-limits.ipynb)"),
    (f'%pip install --quiet "transformer-core @ git+https://github.com/{UPSTREAM}@main"',
     f'%pip install --quiet "transformer-core @ git+https://github.com/{FORK}@{TAG}"'),
    (f"`pip install git+https://github.com/{UPSTREAM}.git@main`.",
     f"`pip install git+https://github.com/{FORK}.git@{TAG}`."),
    (f"see [the solutions](https://github.com/{UPSTREAM}/tree/main/solutions) and "
     f"<https://github.com/{UPSTREAM}/blob/main/LICENSE>",
     f"see [the solutions](https://github.com/{FORK}/tree/{TAG}/solutions) and "
     f"<https://github.com/{FORK}/blob/{TAG}/LICENSE>"),
    (f"https://mybinder.org/v2/gh/{UPSTREAM}/main?urlpath=tree/book/01-rnn-limits.ipynb",
     f"https://mybinder.org/v2/gh/{FORK}/{TAG}?urlpath=tree/book/01-rnn-limits.ipynb"),
    (f"https://raw.githubusercontent.com/{UPSTREAM}/main/book/intro.md",
     f"https://raw.githubusercontent.com/{FORK}/{TAG}/book/intro.md"),
    (f"Report it at https://github.com/{UPSTREAM}/issues or clone https://github.com/{UPSTREAM}.git. "
     f"Home: https://github.com/{UPSTREAM}.",
     f"Report it at https://github.com/{FORK}/issues or clone https://github.com/{FORK}.git. "
     f"Home: https://github.com/{FORK}."),
    # GitHub names are case-insensitive; a link written in another case is still the course's.
    ("https://github.com/Transformer-Course/Transformer-Core-Mechanisms/blob/main/README.md",
     f"https://github.com/{FORK}/blob/{TAG}/README.md"),
])
def test_rewrite_points_every_form_of_link_at_the_new_repository_and_ref(before, after):
    assert rewrite_repository_links(before, OLD, NEW) == after
    assert rewrite_repository_links(after, [NEW], NEW) == after       # idempotent


@pytest.mark.parametrize("other", [
    "https://github.com/karpathy/nanoGPT/blob/master/model.py",
    "https://github.com/pytorch/pytorch/issues/103963",
    "https://huggingface.co/openai-community/gpt2",
    "https://arxiv.org/abs/1706.03762",
    f"https://github.com/{UPSTREAM}-solutions/blob/main/x.ipynb",     # a repository with a longer name
    f"https://github.com/someone-else/{UPSTREAM.split('/')[1]}/blob/main/x.ipynb",
    "https://colab.research.google.com/github/karpathy/nanoGPT/blob/master/demo.ipynb",
    'pip install "transformers @ git+https://github.com/huggingface/transformers@main"',
])
def test_rewrite_leaves_other_repositories_alone(other):
    text = f"before {other} after"
    assert rewrite_repository_links(text, OLD, NEW) == text


def test_rewrite_recognises_a_known_branch_with_a_slash():
    old = [RepositoryRef(UPSTREAM, "term/2025")]
    text = f"https://github.com/{UPSTREAM}/blob/term/2025/README.md and git+https://github.com/{UPSTREAM}@term/2025\""
    assert rewrite_repository_links(text, old, NEW) == (
        f"https://github.com/{FORK}/blob/{TAG}/README.md and git+https://github.com/{FORK}@{TAG}\"")


# --- _config.yml ----------------------------------------------------------------------------------


def _course(tmp_path: Path, config: str) -> Path:
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    (root / "_config.yml").write_text(config, encoding="utf-8")
    return root


@pytest.mark.parametrize("config, message", [
    ("title: x\n", "must set repository.url"),
    ("repository:\n  url: https://github.com/a/b\n", "must set repository.url"),
    ("repository:\n  url: https://gitlab.com/a/b\n  branch: main\n", "not a GitHub repository address"),
    ("repository:\n  url: https://github.com/a/b\n  branch: main\n  release: 2026.1\n", "quote it"),
    ("repository:\n  url: https://github.com/a/b\n  branch: main\n  release: \"v 1\"\n", "not a usable ref"),
])
def test_bad_repository_settings_are_usage_errors(tmp_path, capsys, config, message):
    root = _course(tmp_path, config)
    with pytest.raises(ConfigError, match=message):
        repository_settings(root)
    assert main(["--root", str(root), "release", TAG]) == 2
    assert message in capsys.readouterr().err
    assert main(["--root", str(root), "normalize", "--repoint"]) == 2


def test_missing_config_file_is_a_usage_error(tmp_path, capsys):
    root = _course(tmp_path, "")
    (root / "_config.yml").unlink()
    assert main(["--root", str(root), "release", TAG]) == 2
    assert "_config.yml" in capsys.readouterr().err


@pytest.mark.parametrize("tag", ["v 1", "v1..2", "term/2026", "-v1", "v1.", "v1.lock", "deadbeef", "main", ""])
def test_bad_tag_names_are_refused_before_anything_changes(tmp_path, capsys, tag):
    root = _course(tmp_path, "repository:\n  url: https://github.com/a/b\n  branch: main\n")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert main(["--root", str(root), "release", "--", tag]) == 2
    assert f"cannot release as {tag!r}" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_an_existing_tag_is_refused(tmp_path, capsys):
    root = _course(tmp_path, "repository:\n  url: https://github.com/a/b\n  branch: main\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"], ["tag", TAG]):
        subprocess.run(git + command, check=True, capture_output=True)
    assert main(["--root", str(root), "release", TAG]) == 2
    assert f"tag {TAG} already exists" in capsys.readouterr().err


def test_set_release_keeps_comments_and_replaces_the_commented_example(tmp_path):
    root = tmp_path
    text = ("# top\nrepository:\n  url: https://github.com/a/b  # the fork\n  branch: main\n"
            "  # A tag pinned by every link.\n  # release: \"v2000.1\"\n  path_to_book: \"\"\nhtml:\n  x: 1\n")
    (root / "_config.yml").write_text(text, encoding="utf-8")
    set_release(root, TAG)
    assert (root / "_config.yml").read_text() == text.replace('  # release: "v2000.1"', f'  release: "{TAG}"')
    set_release(root, "v2026.2")
    assert repository_settings(root).release == "v2026.2"
    (root / "_config.yml").write_text("repository:\n  url: https://github.com/a/b\n  branch: main\nhtml: {}\n")
    set_release(root, TAG)
    assert (root / "_config.yml").read_text() == (
        f'repository:\n  url: https://github.com/a/b\n  branch: main\n  release: "{TAG}"\nhtml: {{}}\n')


def test_release_commands_commit_before_tagging_and_push_the_tag_first():
    commands = release_commands(TAG, "main", REPO_ROOT)
    assert [c.split()[1] for c in commands] == ["add", "commit", "tag", "push", "push"]
    assert commands[2] == f'git tag -a {TAG} -m "Course release {TAG}"'
    assert commands[3:] == [f"git push origin {TAG}", "git push origin main"]
    assert all(name in commands[0] for name in ("_config.yml", "book", "solutions", "exercises", "README.md"))


# --- the real repository --------------------------------------------------------------------------


def test_every_link_to_the_repository_follows_config():
    """Each setup cell, Colab badge, closing exercise link and install line in book/, solutions/,
    exercises/ and the READMEs opens the repository and ref of _config.yml today."""
    problems = repository_link_problems(REPO_ROOT)
    assert not problems, ("links disagree with _config.yml; run `python -m autograder normalize --repoint` "
                          "and `make exercises`:\n" + "\n".join(problems))
    pinned = repository_settings(REPO_ROOT).pinned
    assert course_repositories(REPO_ROOT) == sorted({RepositoryRef(pinned.slug, pinned.ref),
                                                      RepositoryRef(pinned.slug, repository_settings().branch)},
                                                     key=lambda r: (r.slug, r.ref))
    links = repository_links(REPO_ROOT)
    notebooks = [p for p in linked_paths(REPO_ROOT) if p.suffix == ".ipynb"]
    # every notebook has at least its badge and its setup cell; the intro has the install line
    per_file = {path: sum(link.path == path for link in links)
                for path in (p.relative_to(REPO_ROOT).as_posix() for p in notebooks)}
    assert all(count >= 2 for count in per_file.values()), per_file
    assert any(link.path == "book/intro.md" and link.text.startswith("git+") for link in links)


def test_link_problems_catch_a_drift(tmp_path):
    root = _course(tmp_path, "repository:\n  url: https://github.com/a/b\n  branch: main\n")
    shutil.copy(FIXTURE / "_config.yml", root / "_config.yml")
    assert repository_link_problems(root) == []
    readme = root / "README.md"
    readme.write_text("Install: `pip install \"transformer-core @ git+https://github.com/old/course@v1\"`;\n"
                      "also https://github.com/transformer-course/autograder-fixture/blob/dev/README.md\n")
    problems = repository_link_problems(root)
    assert [p.split(":")[0:2] for p in problems] == [["README.md", "1"], ["README.md", "2"]]
    assert "old/course@v1" in problems[0] and "autograder-fixture@dev" in problems[1]


# --- a fork repointed and released: a copy of the whole repository ---------------------------------


def _upstream_oracle(text: str, ref: str) -> str:
    """What repointing must make of ``text``: the upstream links this repository uses, literally replaced
    (they name upstream's release on a released tree, else its branch)."""
    upstream_ref = repository_settings(REPO_ROOT).pinned.ref
    for old, new in ((f"/{UPSTREAM}/blob/{upstream_ref}/", f"/{FORK}/blob/{ref}/"),        # Colab and GitHub
                     (f"github.com/{UPSTREAM}@{upstream_ref}", f"github.com/{FORK}@{ref}"),
                     (f"github.com/{UPSTREAM}", f"github.com/{FORK}")):
        text = text.replace(old, new)
    return text


def _sources(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        return [cell.source for cell in nbformat.read(str(path), as_version=4).cells]
    return [path.read_text(encoding="utf-8")]


def _checked_files(root: Path) -> list[Path]:
    return sorted(p for name in CHECKED for p in ([root / name] if (root / name).is_file()
                                                   else (root / name).rglob("*"))
                  if p.is_file() and p.suffix in (".ipynb", ".md"))


@pytest.fixture(scope="module")
def fork(tmp_path_factory) -> Path:
    """The repository's tracked files (as in the working tree), with _config.yml naming a fork."""
    root = tmp_path_factory.mktemp("fork")
    tracked = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        if (REPO_ROOT / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, root / name)
    config = root / "_config.yml"
    text = config.read_text(encoding="utf-8")
    assert f"url: https://github.com/{UPSTREAM}\n" in text and "  branch: main\n" in text
    forked = "".join(line for line in text.splitlines(keepends=True)
                     if not line.lstrip().startswith("release:"))     # upstream's release is not the fork's
    config.write_text(forked.replace(f"github.com/{UPSTREAM}", f"github.com/{FORK}")
                      .replace("  branch: main\n", f"  branch: {FORK_BRANCH}\n"), encoding="utf-8")
    return root


def _assert_repointed(original_root: Path, root: Path, ref: str) -> None:
    """No link to upstream is left, and every new link sits where an old one was, with ``ref``."""
    upstream_before = fork_after = 0
    for path in _checked_files(original_root):
        relative = path.relative_to(original_root)
        old_text, new_text = path.read_text(encoding="utf-8"), (root / relative).read_text(encoding="utf-8")
        assert UPSTREAM.lower() not in new_text.lower(), f"{relative} still names {UPSTREAM}"
        upstream_before += old_text.count(UPSTREAM)
        fork_after += new_text.count(FORK)
        assert _sources(root / relative) == [_upstream_oracle(s, ref) for s in _sources(path)], relative
    assert upstream_before >= 70 and fork_after == upstream_before


def test_repoint_and_release_leave_no_link_to_upstream(fork, capsys, tmp_path):
    # the fork, before: every link still names upstream, which the check reports
    assert len(repository_link_problems(fork)) >= 70
    assert main(["--root", str(fork), "normalize", "--check", "--repoint"]) == 1
    assert "links not repointed: " in capsys.readouterr().out     # book/intro.md

    assert main(["--root", str(fork), "normalize", "--repoint"]) == 0
    _assert_repointed(REPO_ROOT, fork, FORK_BRANCH)
    assert repository_link_problems(fork) == []
    assert main(["--root", str(fork), "normalize", "--check", "--repoint"]) == 0

    capsys.readouterr()
    assert main(["--root", str(fork), "release", TAG]) == 0
    out = capsys.readouterr().out
    assert repository_settings(fork).release == TAG
    _assert_repointed(REPO_ROOT, fork, TAG)
    assert repository_link_problems(fork) == []
    for command in release_commands(TAG, FORK_BRANCH, fork):
        assert command in out
    assert out.index("git commit") < out.index("git tag -a") < out.index(f"git push origin {TAG}")
    for notebook in ("book/01-rnn-limits.ipynb", "solutions/02-self-attention/self_attention.ipynb",
                     "exercises/02-self-attention/self_attention.ipynb"):
        assert convention_problems(fork / notebook, fork) == []
    # exercises/ is exactly what `generate` makes of the pinned solutions (so nbgrader's checksums
    # match the rewritten cells)
    generate(["02-self-attention"], root=fork, output_dir=tmp_path)
    fresh = tmp_path / "02-self-attention" / "self_attention.ipynb"
    assert fresh.read_bytes() == (fork / "exercises" / "02-self-attention" / "self_attention.ipynb").read_bytes()
    assert f"@{TAG}" in fresh.read_text(encoding="utf-8")
