"""Fetch the browser assets the book serves itself (MathJax, the Jupyter widget manager), and the
CJK font the Chinese build draws figure text with (Noto Sans SC, SIL Open Font License 1.1).

The published book must work without any CDN: readers behind firewalls still get typeset math and
rendered widgets, and the browser test runs offline. So the JavaScript that pages load is fetched
at build time from the npm registry, pinned by ``site/assets.json`` (version, tarball address and
sha512 integrity), and only the files the pages need are extracted into::

    _build/site-assets/vendor/<dest>/...      (served as _static/vendor/<dest>/...)
    _build/site-assets/fonts/<dest>/...       (a package with "serve": false: used by the build, not published)

Nothing here is committed. Tarballs are kept in ``$XDG_CACHE_HOME/transformer-core-site`` (by
default ``~/.cache/transformer-core-site``) so that a fresh clone on the same machine does not
download them again. Only the Python standard library is used, so this works from a fresh clone
with nothing but Python; proxies are taken from the usual ``https_proxy`` environment variables,
and ``NPM_REGISTRY`` replaces ``https://registry.npmjs.org`` for a mirror.

Usage::

    python site/fetch_assets.py            # fetch if missing or out of date (what `make book` runs)
    python site/fetch_assets.py --force    # fetch again
    python site/fetch_assets.py --check    # exit 1 unless the assets are present and up to date

The ``course_site`` Sphinx extension calls :func:`ensure_assets` itself, so a plain
``jupyter-book build .`` works too.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
REPO_ROOT = SITE_DIR.parent
MANIFEST = SITE_DIR / "assets.json"
DEFAULT_OUT = REPO_ROOT / "_build" / "site-assets"
STAMP = ".assets-stamp.json"
DEFAULT_REGISTRY = "https://registry.npmjs.org"


class AssetError(RuntimeError):
    """An asset could not be fetched, verified or extracted."""


def load_manifest(path: Path = MANIFEST) -> dict:
    """Return the parsed manifest; each package has name, version, tarball, integrity, dest, strip, include."""
    manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    for package in manifest["packages"]:
        missing = {"name", "version", "tarball", "integrity", "dest", "strip", "include"} - set(package)
        if missing:
            raise AssetError(f"{path}: package {package.get('name', '?')} lacks {sorted(missing)}")
    return manifest


def _manifest_digest(manifest: dict) -> str:
    return hashlib.sha256(json.dumps(manifest["packages"], sort_keys=True).encode()).hexdigest()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transformer-core-site"


def _check_integrity(data: bytes, integrity: str, what: str) -> None:
    algorithm, _, expected = integrity.partition("-")
    if algorithm not in ("sha512", "sha384", "sha256"):
        raise AssetError(f"{what}: unsupported integrity algorithm {algorithm!r}")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise AssetError(f"{what}: integrity mismatch (expected {integrity}, got {algorithm}-{actual}); "
                         "the download is corrupt or the manifest is wrong")


def _download(package: dict, *, quiet: bool) -> bytes:
    """Return the package's tarball, from the local cache or the registry, checked against its integrity."""
    what = f"{package['name']}@{package['version']}"
    cached = _cache_dir() / Path(package["tarball"]).name
    if cached.is_file():
        data = cached.read_bytes()
        try:
            _check_integrity(data, package["integrity"], what)
            return data
        except AssetError:
            cached.unlink(missing_ok=True)
    url = package["tarball"]
    registry = os.environ.get("NPM_REGISTRY", "").rstrip("/")
    if registry:
        url = url.replace(DEFAULT_REGISTRY, registry, 1)
    last_error = None
    for attempt in range(3):
        try:
            if not quiet:
                print(f"fetch_assets: downloading {what} from {url}", file=sys.stderr)
            request = urllib.request.Request(url, headers={"User-Agent": "transformer-core-site/1"})
            with urllib.request.urlopen(request, timeout=60) as response:
                data = response.read()
            break
        except OSError as error:  # URLError, timeouts, connection resets
            last_error = error
            time.sleep(2 * (attempt + 1))
    else:
        raise AssetError(f"cannot download {what} from {url}: {last_error}. The book needs the npm registry "
                         "once to fetch its browser assets (set NPM_REGISTRY for a mirror, or https_proxy).")
    _check_integrity(data, package["integrity"], what)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(cached)
    except OSError:
        pass  # the cache is an optimisation only
    return data


def _extract(package: dict, data: bytes, dest: Path) -> list[str]:
    """Extract the package's included files under ``dest``; return their paths relative to ``dest``."""
    strip, patterns = package["strip"], package["include"]
    matched = {pattern: 0 for pattern in patterns}
    written = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = member.name
            hits = [p for p in patterns if fnmatch.fnmatchcase(name, p)]
            if not hits:
                continue
            for pattern in hits:
                matched[pattern] += 1
            relative = name[len(strip):] if name.startswith(strip) else Path(name).name
            target = (dest / relative).resolve()
            if dest.resolve() not in target.parents:
                raise AssetError(f"{package['name']}: refusing to extract {name} outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
            written.append(Path(relative).as_posix())
    unused = [pattern for pattern, count in matched.items() if not count]
    if unused:
        raise AssetError(f"{package['name']}@{package['version']}: no file matches {unused}; "
                         "update site/assets.json")
    return sorted(written)


def assets_up_to_date(out: Path = DEFAULT_OUT, manifest: dict | None = None) -> bool:
    """True if ``out`` holds the assets of the current manifest."""
    manifest = manifest or load_manifest()
    try:
        stamp = json.loads((Path(out) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if stamp.get("manifest") != _manifest_digest(manifest):
        return False
    return all((Path(out) / f).is_file() for f in stamp.get("files", []))


def cjk_font(out: Path = DEFAULT_OUT) -> Path:
    """The CJK font file that the Chinese build draws figure text with (fetched by :func:`ensure_assets`)."""
    manifest = load_manifest()
    for package in manifest["packages"]:
        if not package.get("serve", True):
            for pattern in package["include"]:
                if pattern.endswith((".woff", ".woff2", ".ttf", ".otf")):
                    return Path(out) / "fonts" / package["dest"] / pattern[len(package["strip"]):]
    raise AssetError("site/assets.json names no font (a package with \"serve\": false)")


def ensure_assets(out: Path = DEFAULT_OUT, *, force: bool = False, quiet: bool = False) -> Path:
    """Make sure ``out/vendor`` holds every asset of the manifest; fetch what is missing.

    The new tree is assembled in a temporary folder beside ``out`` and moved into place, so a
    concurrent build never sees a half-written folder.

    Returns:
        ``out``, whose ``vendor/`` folder is ready to be served as ``_static/vendor/``.

    Raises:
        AssetError: when a tarball cannot be downloaded or fails its integrity check.
    """
    out = Path(out)
    manifest = load_manifest()
    if not force and assets_up_to_date(out, manifest):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".site-assets-", dir=out.parent))
    try:
        files = []
        for package in manifest["packages"]:
            data = _download(package, quiet=quiet)
            folder = "vendor" if package.get("serve", True) else "fonts"
            dest = staging / folder / package["dest"]
            files += [f"{folder}/{package['dest']}/{f}" for f in _extract(package, data, dest)]
        stamp = {"manifest": _manifest_digest(manifest), "files": files,
                 "packages": {p["name"]: p["version"] for p in manifest["packages"]}}
        (staging / STAMP).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
        old = out.with_name(f".{out.name}-old-{os.getpid()}")
        try:
            if out.exists():
                out.replace(old)
            staging.replace(out)
        except OSError:
            # Another build put its copy in place at the same moment; use it if it is complete.
            if not assets_up_to_date(out, manifest):
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not quiet:
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file() and f.name != STAMP)
        print(f"fetch_assets: {len(files)} files ({size / 1e6:.1f} MB) in {out}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to put vendor/ (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="fetch again even if up to date")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if missing or out of date")
    args = parser.parse_args(argv)
    if args.check:
        ok = assets_up_to_date(args.out)
        print("site assets are up to date" if ok else f"site assets are missing or stale in {args.out}")
        return 0 if ok else 1
    try:
        ensure_assets(args.out, force=args.force)
    except AssetError as error:
        print(f"fetch_assets: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
