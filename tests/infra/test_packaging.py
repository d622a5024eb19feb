"""Docker-free Lambda assets: the right contents, built for the Lambda platform,
no boto3, reproducible and cached."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from infra import packaging
from infra.app import asset_specs

from .conftest import write_test_ca

pytestmark = pytest.mark.infra

EM_AARCH64 = 0xB7


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return struct.unpack("<H", header[18:20])[0]


@pytest.fixture(scope="module")
def built():
    return packaging.build_all(asset_specs(), progress=print)


def test_each_asset_holds_its_package_the_shared_one_and_its_dependencies(built):
    for spec in asset_specs():
        asset = built[spec.name]
        top = {p.name for p in asset.path.iterdir()}
        own = {s.name for s in spec.sources}
        assert own <= top
        other_tools = {"consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro", "orchestrator"} - own
        assert not (other_tools & top), f"{spec.name} bundles another function's package"
        for forbidden in packaging.FORBIDDEN_DISTRIBUTIONS:
            assert forbidden not in top, f"{spec.name} bundles {forbidden}"
        assert "bin" not in top
        print(asset.describe())
        assert asset.size_bytes < 250_000_000  # Lambda's unzipped limit


def test_compiled_wheels_are_for_the_lambda_platform(built):
    tools = built["cadencia-emitir-reembolso"].path
    orchestrator = built["cadencia-orquestrador"].path
    for root, package in ((tools, "pydantic_core"), (tools, "psycopg_binary"), (orchestrator, "jiter"),
                          (orchestrator, "pydantic_core")):
        objects = list((root / package).rglob("*.so"))
        assert objects, f"{package} has no compiled module"
        for so in objects:
            assert "cpython-312-aarch64" in so.name or ".abi3." in so.name or package == "psycopg_binary", so.name
            assert _elf_machine(so) == EM_AARCH64, so
        (wheel,) = root.glob(f"{package}-*.dist-info/WHEEL")
        tags = [line.split(": ", 1)[1] for line in wheel.read_text().splitlines() if line.startswith("Tag: ")]
        assert any(t.startswith("cp312-") and t.endswith("aarch64") for t in tags) or \
            any(t.endswith("aarch64") and "abi3" in t for t in tags), tags
    # psycopg's bundled libpq is for aarch64 too.
    for lib in (tools / "psycopg_binary.libs").glob("*.so*"):
        assert _elf_machine(lib) == EM_AARCH64, lib


def test_the_build_is_reproducible_and_cached(built):
    again = packaging.build_all(asset_specs(), progress=lambda _: None)
    for name, asset in built.items():
        assert again[name].asset_hash == asset.asset_hash
        assert again[name].reused


def test_the_hash_follows_the_sources(tmp_path):
    source = tmp_path / "cadencia_shared"
    shutil.copytree(packaging.ROOT / "functions" / "cadencia_shared", source,
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = packaging.AssetSpec("hash-probe", (source,), packaging.ROOT / "requirements" / "lambda-tools.txt")
    deps = packaging.build_dependencies(spec.requirements, progress=lambda _: None)
    first = packaging.asset_hash(spec, deps.name, None)
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"noise")
    assert packaging.asset_hash(spec, deps.name, None) == first  # caches do not count
    (source / "catalog.py").write_text((source / "catalog.py").read_text() + "\n# changed\n")
    assert packaging.asset_hash(spec, deps.name, None) != first


def test_a_tool_asset_is_not_built_without_the_rds_ca_bundle_unless_opted_out(tmp_path, monkeypatch):
    spec = next(s for s in asset_specs() if s.name == "cadencia-consultar-status-pedido")
    monkeypatch.setenv("CADENCIA_RDS_CA_BUNDLE", str(tmp_path / "absent.pem"))
    with pytest.raises(packaging.PackagingError, match="allowUnverifiedDbTls"):
        packaging.build_asset(spec, progress=lambda _: None)
    without = packaging.build_asset(spec, progress=lambda _: None, allow_unverified_db_tls=True)
    assert not without.ca_bundle and not (without.path / packaging.RDS_CA_BUNDLE_NAME).exists()
    fake = tmp_path / "fake.pem"
    fake.write_text("-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("CADENCIA_RDS_CA_BUNDLE", str(fake))
    with pytest.raises(packaging.PackagingError, match="not a PEM CA bundle"):
        packaging.build_asset(spec, progress=lambda _: None)  # a file that is no certificate is refused too
    pem = write_test_ca(tmp_path / "global-bundle.pem")
    monkeypatch.setenv("CADENCIA_RDS_CA_BUNDLE", str(pem))
    with_ca = packaging.build_asset(spec, progress=lambda _: None)
    assert with_ca.ca_bundle and (with_ca.path / packaging.RDS_CA_BUNDLE_NAME).read_text() == pem.read_text()
    assert with_ca.asset_hash != without.asset_hash
    orchestrator = next(s for s in asset_specs() if s.name == "cadencia-orquestrador")
    assert not orchestrator.include_ca_bundle  # it never talks to PostgreSQL


def _tree_digest(root: Path) -> dict[str, str]:
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_independent_build_is_byte_identical(tmp_path, monkeypatch):
    """A second machine (an empty build cache) gets the very same files, not just the same hash."""
    spec = next(s for s in asset_specs() if s.name == "cadencia-atualizar-cadastro")
    reference = packaging.build_asset(spec, progress=lambda _: None)
    monkeypatch.setenv("CADENCIA_BUILD_DIR", str(tmp_path / "build"))
    fresh = packaging.build_asset(spec, progress=lambda _: None)
    assert not fresh.reused
    assert fresh.asset_hash == reference.asset_hash
    assert _tree_digest(fresh.path) == _tree_digest(reference.path)


def _runtime_magic(python: str) -> bytes:
    import subprocess

    probe = "import importlib.util, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)"
    out = subprocess.run([python, "-c", probe],
                         capture_output=True, check=True)
    return out.stdout


def test_every_module_ships_bytecode_for_the_runtime_python(built):
    """Compiled by the runtime's minor version (3.12), unchecked-hash (no timestamp,
    no source check), paths naming /var/task: nothing is compiled on a cold start."""
    bytecode = packaging.runtime_python()
    if bytecode.python is None:
        pytest.skip(f"no python{packaging.LAMBDA_PYTHON_VERSION} on this machine: assets are built without bytecode")
    magic = _runtime_magic(bytecode.python)
    tag = "cpython-" + packaging.LAMBDA_PYTHON_VERSION.replace(".", "")
    for spec in asset_specs():
        root = built[spec.name].path
        for source in spec.sources:
            for module in (root / source.name).rglob("*.py"):
                pyc = module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"
                assert pyc.is_file(), pyc
                header = pyc.read_bytes()[:8]
                assert header[:4] == magic and int.from_bytes(header[4:8], "little") == 0b01, pyc  # unchecked-hash
        # A dependency of the asset's (the cookie authorizer's only one is cryptography).
        package, stem = ("pydantic", "main") if (root / "pydantic").is_dir() else ("cryptography", "__init__")
        compiled = root / package / "__pycache__" / f"{stem}.{tag}.pyc"
        assert compiled.is_file(), "the dependencies are compiled too"
        assert f"/var/task/{package}/{stem}.py".encode() in compiled.read_bytes()
        assert not list(root.rglob("*.cpython-311.pyc")), "bytecode of this machine's Python never ships"
