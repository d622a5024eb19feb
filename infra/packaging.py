"""Lambda assets built without Docker, reproducibly, and cached between synths.

Each asset is one directory: the function's own package(s), the shared package
``cadencia_shared`` and the third-party wheels of its requirements file,
installed by pip *for the Lambda platform* (``--platform``/``--python-version``/
``--only-binary=:all:``), never for this machine. boto3/botocore are not bundled
(the Lambda runtime provides them), and the build fails if a dependency drags
them in.

Bytecode for the runtime: a function whose asset has no ``__pycache__`` compiles
every module it imports on each cold start (the runtime cannot write to
/var/task), measured at +60 % import time (scripts/bench.py). So the asset ships
.pyc files compiled by an interpreter of the runtime's exact minor version
(``LAMBDA_PYTHON_VERSION``; the machine's own Python is 3.11 and cannot write
3.12 bytecode), found by ``runtime_python()``: ``CADENCIA_LAMBDA_PYTHON``, else
``python3.12`` on PATH, else pyenv's. They are *unchecked-hash* .pyc (PEP 552):
no timestamp, the same bytes on every machine, never re-validated against the
source (an asset is immutable), with paths rewritten to /var/task. Without such
an interpreter the asset is built without bytecode, says so, and hashes
differently (the mode is part of the hash).

Reproducible: versions come from ``requirements.lock`` (``-c``), pip writes no
bytecode of its own (``--no-compile``: its .pyc would embed timestamps and this
machine's interpreter), and the asset hash is computed from the inputs
(requirements, lock, platform, bytecode mode, source files), so the same commit
always yields the same asset hash and CloudFormation sees no change.

Cached: third-party dependencies under ``.build/deps/<hash>``, assembled assets
under ``.build/assets/<name>-<hash>``; a synth with unchanged inputs only hashes
files. Set ``CADENCIA_BUILD_DIR`` to move the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .bytecode import LAMBDA_PYTHON_VERSION, Bytecode, compile_tree, runtime_python

Progress = Callable[[str], object]  # where a build says what it does (print, or a test's sink)

ROOT = Path(__file__).resolve().parents[1]
LOCK_FILE = ROOT / "requirements.lock"

# arm64 (Graviton): about 20% cheaper per GB-second than x86_64, and every
# compiled dependency (pydantic-core, psycopg-binary, jiter, rpds-py) ships
# aarch64 wheels. psycopg-binary's are manylinux_2_28, which the python3.12
# runtime (Amazon Linux 2023, glibc 2.34) satisfies. pip takes each --platform
# literally (measured: manylinux_2_28 alone rejects the manylinux2014 wheels of
# pydantic-core), so the accepted glibc baselines are listed one by one.
LAMBDA_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64")
PIP_VERSION_KEY = "pip-target-v2"  # bump to invalidate every cached build

# The runtime provides these; bundling them would pin a second, older copy.
FORBIDDEN_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer")

RDS_CA_BUNDLE_NAME = "global-bundle.pem"
DEFAULT_CA_BUNDLE = ROOT / "infra" / "certs" / RDS_CA_BUNDLE_NAME

_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", "tests"}
# A package's grants.sql is the database's contract, gathered into sql/grants.sql by
# infra/derived.py; the Lambda never reads it, so its asset does not carry it.
_SKIP_SUFFIXES = {".pyc", ".pyo", ".sql"}


class PackagingError(RuntimeError):
    pass


@dataclass(frozen=True)
class AssetSpec:
    """What goes into one function's asset."""

    name: str  # the function name; also the cache directory prefix
    sources: tuple[Path, ...]  # package directories copied to the asset root
    requirements: Path  # pip requirements file of the third-party deps
    include_ca_bundle: bool = False


@dataclass
class BuiltAsset:
    name: str
    path: Path
    asset_hash: str
    size_bytes: int
    files: int
    ca_bundle: bool
    reused: bool = field(default=False)

    def describe(self) -> str:
        origin = "cached" if self.reused else "built"
        extra = ", with RDS CA bundle" if self.ca_bundle else ""
        return f"{self.name}: {self.size_bytes / 1_000_000:.1f} MB unzipped, {self.files} files ({origin}{extra})"


def build_dir() -> Path:
    return Path(os.environ.get("CADENCIA_BUILD_DIR", ROOT / ".build"))


def ca_bundle_path() -> Path | None:
    """The RDS CA bundle to ship, if the deployer put one in place."""
    override = os.environ.get("CADENCIA_RDS_CA_BUNDLE")
    path = Path(override) if override else DEFAULT_CA_BUNDLE
    return path if path.is_file() else None


MISSING_CA_BUNDLE = (
    "no RDS CA bundle: the tools would send their IAM auth token to whoever answers TLS. Put AWS's "
    f"{RDS_CA_BUNDLE_NAME} in infra/certs/ (or set CADENCIA_RDS_CA_BUNDLE to its path); see "
    "docs/infrastructure.md, 'The RDS CA bundle'. To deploy without server verification anyway "
    "(sslmode=require), pass -c allowUnverifiedDbTls=true."
)


def check_ca_bundle(path: Path) -> int:
    """The number of CA certificates in ``path``; fails on anything OpenSSL cannot load as PEM CAs."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError) as err:
        raise PackagingError(f"{path} is not a PEM CA bundle: {err}") from err
    certificates = context.get_ca_certs()
    if not certificates:
        raise PackagingError(f"{path} holds no CA certificate")
    return len(certificates)


def _ca_bundle_for(spec: AssetSpec, allow_unverified_db_tls: bool) -> Path | None:
    if not spec.include_ca_bundle:
        return None
    bundle = ca_bundle_path()
    if bundle is None:
        if allow_unverified_db_tls:
            return None
        raise PackagingError(f"{spec.name}: {MISSING_CA_BUNDLE}")
    check_ca_bundle(bundle)
    return bundle


def _sha256() -> hashlib._Hash:
    return hashlib.sha256()


def iter_source_files(directory: Path) -> Iterable[Path]:
    """Files of a package directory in a stable order, without caches or tests."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.suffix in _SKIP_SUFFIXES or name.startswith("."):
                continue
            yield path


def dependencies_hash(requirements: Path, bytecode: Bytecode | None = None) -> str:
    h = _sha256()
    h.update(PIP_VERSION_KEY.encode())
    h.update((bytecode or runtime_python()).key.encode())
    h.update(LAMBDA_PYTHON_VERSION.encode())
    h.update(",".join(LAMBDA_PLATFORMS).encode())
    h.update(b"\0requirements\0" + requirements.read_bytes())
    h.update(b"\0lock\0" + LOCK_FILE.read_bytes())
    return h.hexdigest()


def asset_hash(spec: AssetSpec, deps_hash: str, ca_bundle: Path | None) -> str:
    h = _sha256()
    h.update(deps_hash.encode())
    for source in spec.sources:
        h.update(b"\0source\0" + source.name.encode())
        for path in iter_source_files(source):
            h.update(b"\0" + path.relative_to(source).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    if ca_bundle is not None:
        h.update(b"\0ca\0" + ca_bundle.read_bytes())
    return h.hexdigest()


def _pip_install(requirements: Path, target: Path) -> None:
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-input", "--no-compile", "--no-warn-script-location",
        "--target", str(target), "--implementation", "cp", "--python-version", LAMBDA_PYTHON_VERSION,
        "--only-binary=:all:", "-c", str(LOCK_FILE), "-r", str(requirements),
    ]
    for platform in LAMBDA_PLATFORMS:
        cmd += ["--platform", platform]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        # Keep pip's own error: which wheel had no build for the platform, or
        # that the package registry could not be reached on a first build.
        detail = "\n".join(
            line for line in (proc.stderr or proc.stdout).splitlines() if "is ignored: it is neither" not in line
        )
        raise PackagingError(f"pip could not install {requirements.name} for the Lambda platform:\n{detail}")


def build_dependencies(requirements: Path, progress: Progress = print, bytecode: Bytecode | None = None) -> Path:
    """Install ``requirements`` for the Lambda platform once (and compile them);
    return the cached directory."""
    bytecode = bytecode or runtime_python()
    deps_hash = dependencies_hash(requirements, bytecode)
    final = build_dir() / "deps" / f"{requirements.stem}-{deps_hash[:16]}"
    if _marker(final).exists():
        return final
    shutil.rmtree(final, ignore_errors=True)  # an interrupted build left it without its marker
    progress(f"[packaging] installing {requirements.name} for python{LAMBDA_PYTHON_VERSION}/"
             f"{'+'.join(LAMBDA_PLATFORMS)} (first build; cached afterwards)")
    tmp = _fresh_dir(final)
    try:
        _pip_install(requirements, tmp)
        bundled = [d for d in FORBIDDEN_DISTRIBUTIONS if (tmp / d).exists()]
        if bundled:
            raise PackagingError(f"{requirements.name} pulls in {bundled}: the Lambda runtime provides them")
        # Console scripts are useless in Lambda and embed this machine's interpreter path.
        shutil.rmtree(tmp / "bin", ignore_errors=True)
        compile_tree(tmp, bytecode)
        tmp.rename(final)
        _marker(final).write_text(json.dumps({"requirements": requirements.name, "hash": deps_hash}))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _fresh_dir(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    # mkdtemp creates 0700; Lambda's runtime user must be able to read the tree.
    tmp.chmod(0o755)
    return tmp


def _marker(directory: Path) -> Path:
    # Beside the directory, not inside it: the asset must hold only what Lambda runs.
    return directory.with_name(directory.name + ".complete")


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)  # same filesystem: no bytes copied
    except OSError:
        shutil.copy2(src, dst)


def _tree_size(path: Path) -> tuple[int, int]:
    size = files = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            size += os.path.getsize(os.path.join(dirpath, name))
            files += 1
    return size, files


def build_asset(spec: AssetSpec, progress: Progress = print, *, allow_unverified_db_tls: bool = False) -> BuiltAsset:
    """Assemble (or reuse) the asset directory of one function.

    A function that talks to PostgreSQL (``include_ca_bundle``) is not built without
    the RDS CA bundle unless ``allow_unverified_db_tls`` (the deployer's explicit opt-out).
    """
    for source in spec.sources:
        if not source.is_dir():
            raise PackagingError(f"{spec.name}: source package {source} does not exist")
    ca_bundle = _ca_bundle_for(spec, allow_unverified_db_tls)
    bytecode = runtime_python()
    if bytecode.python is None:
        progress(f"[packaging] {spec.name}: no python{LAMBDA_PYTHON_VERSION} found (CADENCIA_LAMBDA_PYTHON, PATH, "
                 "pyenv): built WITHOUT bytecode, every cold start will compile the code")
    deps = build_dependencies(spec.requirements, progress, bytecode)
    digest = asset_hash(spec, deps.name, ca_bundle)
    final = build_dir() / "assets" / f"{spec.name}-{digest[:16]}"
    reused = _marker(final).exists()
    if not reused:
        shutil.rmtree(final, ignore_errors=True)
        tmp = _fresh_dir(final)
        try:
            for dirpath, _, filenames in os.walk(deps):
                for name in filenames:
                    src = Path(dirpath) / name
                    _link_or_copy(src, tmp / src.relative_to(deps))
            for source in spec.sources:
                if (tmp / source.name).exists():
                    raise PackagingError(f"{spec.name}: {source.name} collides with a dependency")
                for path in iter_source_files(source):
                    # Copied, not linked: an editor saving in place must not change a built asset.
                    dst = tmp / source.name / path.relative_to(source)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, dst)
            if ca_bundle is not None:
                shutil.copyfile(ca_bundle, tmp / RDS_CA_BUNDLE_NAME)
            for source in spec.sources:  # the dependencies were compiled once, in their cache
                compile_tree(tmp, bytecode, only=source.name)
            tmp.rename(final)
            _marker(final).write_text(digest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    _prune(final)
    size, files = _tree_size(final)
    return BuiltAsset(spec.name, final, digest, size, files, ca_bundle is not None, reused)


KEEP_VERSIONS = 3


def _prune(current: Path) -> None:
    """Keep the few most recent builds of one function (a synth in another shell may
    still point at the previous one); the cache otherwise grows with every edit."""
    prefix = current.name.rsplit("-", 1)[0] + "-"
    versions = sorted(
        (d for d in current.parent.iterdir()
         if d.is_dir() and d.name.startswith(prefix) and d.name[len(prefix):].isalnum()
         and len(d.name) - len(prefix) == 16 and d != current),
        key=lambda d: d.stat().st_mtime, reverse=True)
    for stale in versions[KEEP_VERSIONS - 1:]:
        _marker(stale).unlink(missing_ok=True)
        shutil.rmtree(stale, ignore_errors=True)


def build_all(specs: Sequence[AssetSpec], progress: Progress = print, *,
              allow_unverified_db_tls: bool = False) -> dict[str, BuiltAsset]:
    built = {}
    for spec in specs:
        asset = build_asset(spec, progress, allow_unverified_db_tls=allow_unverified_db_tls)
        progress(f"[packaging] {asset.describe()}")
        built[spec.name] = asset
    return built
