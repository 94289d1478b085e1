"""Gather into one ignored folder (``.device/``) what a lent GPU machine needs for
``benchmarks/device_run.sh``: nothing outside that machine can be reached from it, and its image lacks
the notebook packages.

    .venv/bin/python benchmarks/device_gather.py --nanogpt /tmp/nanoGPT

The folder holds:

* ``wheels/``: the wheels of nbformat, nbclient, ipykernel and ipywidgets (the versions of this venv)
  and of everything they need, for the device's Python (CPython 3.12 on x86-64 Linux), with
  ``requirements.txt`` naming the four; the set is closed (every requirement of every wheel is a wheel
  there, checked here), so ``pip install --no-index`` there never needs the internet, whatever the image
  has;
* ``nanoGPT/``: the source of a nanoGPT checkout (its Python files and configurations, no data or
  checkpoints), for ``benchmarks/vs_nanogpt.py``;
* ``data/tinyshakespeare.txt``: Tiny Shakespeare, its SHA-256 checked;
* ``MANIFEST.md``: what was gathered from where (this checkout's commit, nanoGPT's commit or the hash of
  its files, the wheels) and the sizes; the run's summary quotes it.

Everything that travels to the device (this checkout's tracked and untracked files plus this folder)
must stay under 64 MiB; the script checks that and prints the size.
"""

from __future__ import annotations

import argparse
import datetime
import email.parser
import hashlib
import importlib.metadata
import pathlib
import shutil
import subprocess
import sys
import zipfile

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_runtime.data import TINY_SHAKESPEARE_SHA256, sha256_of  # noqa: E402

# The device's python3 (KINDS.md of the device tool, 2026-11): CPython 3.12.3 on x86-64 Linux.
DEVICE_PYTHON = "3.12"
DEVICE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64")
DEVICE_MARKERS = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython",
                  "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                  "os_name": "posix"}
# What benchmarks/notebook_times.py and the notebooks import that the device's image lacks.
NOTEBOOK_PACKAGES = ("nbformat", "nbclient", "ipykernel", "ipywidgets")
# The modules the notebook run imports through them: nbclient runs kernels with jupyter_client over
# zmq; ipykernel is the kernel (IPython, tornado, traitlets, comm, debugpy) and draws figures inline
# with matplotlib_inline; ipywidgets makes course_runtime.viz's widgets.
RUN_IMPORTS = ("nbformat", "nbclient", "ipykernel", "ipywidgets", "jupyter_client", "jupyter_core", "zmq",
               "tornado", "traitlets", "IPython", "comm", "debugpy", "matplotlib_inline")
NANOGPT_NEEDED = ("train.py", "model.py", "bench.py", "configurator.py", "config/train_shakespeare_char.py",
                  "data/shakespeare_char/prepare.py")
LIMIT_BYTES = 64 * 2**20            # what may travel to the device in one call


def pinned_requirements() -> list[str]:
    """:data:`NOTEBOOK_PACKAGES` at the versions installed here (the ones the tests ran with)."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in NOTEBOOK_PACKAGES]


def download_wheels(folder: pathlib.Path, requirements: list[str]) -> None:
    """``pip download`` ``requirements`` and everything they need as wheels for :data:`DEVICE_PYTHON`
    on :data:`DEVICE_PLATFORMS` (pure-Python wheels serve any platform) into ``folder``."""
    platforms = [arg for platform in DEVICE_PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(folder),
                    "--only-binary=:all:", "--python-version", DEVICE_PYTHON, "--implementation", "cp",
                    *platforms, *requirements], check=True)


def _metadata(wheel: pathlib.Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        return email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))


def top_level_modules(wheel: pathlib.Path) -> set[str]:
    """The importable top-level names a wheel installs (its packages and modules, no ``.dist-info`` or
    ``.data`` folders)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set()
        for path in archive.namelist():
            first = path.split("/", 1)[0]
            if "/" in path and not first.endswith((".dist-info", ".data")):
                names.add(first)
            elif "/" not in path and path.endswith((".py", ".so")):
                names.add(path.split(".", 1)[0])
        return names


def closure_problems(folder: pathlib.Path, requirements: list[str]) -> list[str]:
    """What ``pip install --no-index --find-links folder -r requirements`` on the device could not find
    in ``folder``: a requirement (of the list, or of a wheel there, its markers evaluated for the
    device) with no wheel of a matching version, two wheels of one project, or a module of
    :data:`RUN_IMPORTS` that no wheel installs. Empty when the folder is complete."""
    wheels, problems = {}, []
    for wheel in sorted(folder.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if name in wheels:
            problems.append(f"two wheels of {name}: {wheels[name][0].name} and {wheel.name}")
        wheels[name] = (wheel, version)
    needs = [(Requirement(text), "the list") for text in requirements]
    for name, (wheel, _) in wheels.items():
        needs += [(Requirement(text), wheel.name) for text in _metadata(wheel).get_all("Requires-Dist") or []]
    for requirement, wanted_by in needs:
        if requirement.marker is not None and not requirement.marker.evaluate({**DEVICE_MARKERS, "extra": ""}):
            continue
        found = wheels.get(canonicalize_name(requirement.name))
        if found is None:
            problems.append(f"{requirement} (needed by {wanted_by}): no wheel")
        elif not requirement.specifier.contains(found[1], prereleases=True):
            problems.append(f"{requirement} (needed by {wanted_by}): the wheel is {found[0].name}")
    provided = set().union(*(top_level_modules(wheel) for wheel, _ in wheels.values())) if wheels else set()
    problems += [f"no wheel installs the module {module}" for module in RUN_IMPORTS if module not in provided]
    return problems


def copy_nanogpt(source: pathlib.Path, dest: pathlib.Path) -> str:
    """Copy a nanoGPT checkout's source (Python files, configurations, licence; no data, checkpoints or
    git history) to ``dest``; returns where it came from: its git commit, else a hash of the files."""
    missing = [path for path in NANOGPT_NEEDED if not (source / path).is_file()]
    if missing:
        raise SystemExit(f"--nanogpt {source}: not a nanoGPT checkout (missing {', '.join(missing)})")
    files = sorted({*source.glob("*.py"), *source.glob("config/*.py"), source / "data/shakespeare_char/prepare.py",
                    *(path for path in (source / "LICENSE", source / "README.md") if path.is_file())})
    digest = hashlib.sha256()
    for path in files:
        relative = path.relative_to(source)
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / relative)
        digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes())
    done = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = done.stdout.strip() if done.returncode == 0 else ""
    return (f"commit `{commit}`" if commit else "not a git checkout") + f"; sha256 of its {len(files)} files " \
        f"`{digest.hexdigest()[:16]}`"


def tree_bytes() -> int:
    """Bytes of this checkout's tracked and untracked, not ignored files: what travels besides ``carry``."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    return sum((ROOT / name).stat().st_size for name in listed if name and (ROOT / name).is_file())


def folder_bytes(folder: pathlib.Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", required=True, type=pathlib.Path, help="a nanoGPT checkout (source is copied)")
    parser.add_argument("--data", type=pathlib.Path, default=ROOT.parent / "shared" / "data" / "tinyshakespeare.txt",
                        help="Tiny Shakespeare (default: ../shared/data/tinyshakespeare.txt); its checksum is checked")
    parser.add_argument("--dest", type=pathlib.Path, default=ROOT / ".device", help="the folder (default .device)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"--data {args.data}: no such file")
    if sha256_of(args.data) != TINY_SHAKESPEARE_SHA256:
        parser.error(f"--data {args.data}: its SHA-256 is not Tiny Shakespeare's ({TINY_SHAKESPEARE_SHA256[:12]}...)")
    shutil.rmtree(args.dest, ignore_errors=True)
    (args.dest / "data").mkdir(parents=True)
    shutil.copyfile(args.data, args.dest / "data" / "tinyshakespeare.txt")
    nanogpt = copy_nanogpt(args.nanogpt.expanduser().resolve(), args.dest / "nanoGPT")
    wheels = args.dest / "wheels"
    requirements = pinned_requirements()
    download_wheels(wheels, requirements)
    (wheels / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
    problems = closure_problems(wheels, requirements)
    if problems:
        raise SystemExit("the wheels would not install offline:\n  " + "\n  ".join(problems))

    names = sorted(path.name for path in wheels.glob("*.whl"))
    size = {part: folder_bytes(args.dest / part) for part in ("wheels", "nanoGPT", "data")}
    tree = tree_bytes()
    total = tree + sum(size.values())
    manifest = [
        f"# Gathered for the device on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}", "",
        f"- checkout: commit `{_commit()}`, {tree / 2**20:.1f} MiB of tracked and untracked files",
        f"- nanoGPT: {nanogpt}, from `{args.nanogpt}`",
        f"- Tiny Shakespeare: sha256 `{TINY_SHAKESPEARE_SHA256[:16]}...`, from `{args.data}`",
        f"- wheels for CPython {DEVICE_PYTHON} (x86-64 Linux), {len(names)}: " + ", ".join(f"`{n}`" for n in names),
        f"- sizes: wheels {size['wheels'] / 2**20:.1f} MiB, nanoGPT {size['nanoGPT'] / 2**20:.2f} MiB, data "
        f"{size['data'] / 2**20:.2f} MiB; with the checkout {total / 2**20:.1f} MiB of the 64 MiB a call carries", ""]
    (args.dest / "MANIFEST.md").write_text("\n".join(manifest), encoding="utf-8")
    print("\n".join(manifest))
    if total > LIMIT_BYTES:
        raise SystemExit(f"{total / 2**20:.1f} MiB would travel to the device, over its limit of 64 MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
