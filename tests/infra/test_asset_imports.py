"""Every module a Lambda's code imports is in its asset or provided by the runtime,
and every third-party one is declared in that Lambda's requirements file.

The imports are read from the code (infra/asset_imports.py walks the handler's
first-party modules with ``ast``), the assets are the ones packaging builds for
the Lambda platform."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from cadencia_shared.catalog import (
    DECISION_FUNCTION_NAME,
    DECISION_PACKAGE,
    ORCHESTRATOR_FUNCTION_NAME,
    RECONCILER_FUNCTION_NAME,
    RECONCILER_PACKAGE,
    TOOLS,
)
from canal_whatsapp.settings import INGRESS_FUNCTION_NAME
from infra import asset_imports, contract, db_users, packaging
from infra.app import asset_specs
from infra.operator_contract import CONSOLE_AUTHORIZER_FUNCTION_NAME

pytestmark = pytest.mark.infra

HANDLERS = {**{t.function_name: t.handler.rsplit(".", 1)[0] for t in TOOLS.values()},
            ORCHESTRATOR_FUNCTION_NAME: "orchestrator.handler",
            RECONCILER_FUNCTION_NAME: f"{RECONCILER_PACKAGE}.handler",
            DECISION_FUNCTION_NAME: f"{DECISION_PACKAGE}.handler",
            INGRESS_FUNCTION_NAME: "canal_whatsapp.handler",
            contract.WHATSAPP_CONSUMER_FUNCTION_NAME: "orchestrator.whatsapp_consumer",
            "cadencia-resposta-atendente": "orchestrator.human_reply_handler",
            CONSOLE_AUTHORIZER_FUNCTION_NAME: "autorizar_console.handler"}
# Imported by a dependency, not by our code: pydantic's EmailStr imports email_validator.
IMPORTED_BY_A_DEPENDENCY = {"email-validator"}
# Only the profile tool validates e-mails and phone numbers (each tool asset
# carries only what its own handler imports).
PROFILE_ONLY = ("phonenumbers", "email_validator", "dns")


@pytest.fixture(scope="module")
def built():
    return {spec.name: (spec, packaging.build_asset(spec, progress=lambda _: None)) for spec in asset_specs()}


def _declared(requirements) -> set[str]:
    names = set()
    for line in requirements.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[\[=<>!~ ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_every_import_of_the_handler_is_in_the_asset_or_the_runtime(built, name):
    spec, asset = built[name]
    graph = asset_imports.import_graph(HANDLERS[name], spec.sources)
    assert HANDLERS[name] in graph.first_party and len(graph.first_party) > 3
    assert asset_imports.missing_from_asset(graph, asset.path) == {}
    for module in graph.first_party:  # the code itself is there too
        assert asset_imports.in_asset(module.split(".")[0], asset.path), module


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_every_third_party_import_is_declared_in_the_functions_requirements(built, name):
    spec, _ = built[name]
    graph = asset_imports.import_graph(HANDLERS[name], spec.sources)
    distributions = metadata.packages_distributions()
    declared = _declared(spec.requirements)
    undeclared = {}
    for module in set(graph.third_party) - asset_imports.RUNTIME_PROVIDED:
        owners = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        if not owners & declared:
            undeclared[module] = owners
    assert undeclared == {}


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_every_declared_requirement_is_imported_by_the_handler(built, name):
    """The reverse: nothing is bundled that the function's code never imports."""
    spec, _ = built[name]
    graph = asset_imports.import_graph(HANDLERS[name], spec.sources)
    distributions = metadata.packages_distributions()
    imported = {d.lower().replace("_", "-") for module in graph.third_party for d in distributions.get(module, [])}
    unused = _declared(spec.requirements) - imported - IMPORTED_BY_A_DEPENDENCY
    assert unused == set(), f"{spec.requirements.name} declares {unused}, which {HANDLERS[name]} never imports"


def test_only_the_profile_tool_carries_the_contact_validators(built):
    profile = next(t.function_name for t in TOOLS.values() if t.package == "atualizar_cadastro")
    for name, (_, asset) in built.items():
        carried = {m for m in PROFILE_ONLY if asset_imports.in_asset(m, asset.path)}
        assert carried == (set(PROFILE_ONLY) if name == profile else set()), (name, carried)


def test_the_refund_declares_urllib3(built):
    spec, asset = built["cadencia-emitir-reembolso"]
    graph = asset_imports.import_graph(HANDLERS["cadencia-emitir-reembolso"], spec.sources)
    assert "urllib3" in graph.third_party and "urllib3" in _declared(spec.requirements)
    assert (asset.path / "urllib3").is_dir()


def test_the_walk_sees_deferred_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "handler.py").write_text("from . import logic\n")
    (pkg / "logic.py").write_text("import json\n\ndef f():\n    import somewheel.sub\n    from .adapter import x\n")
    (pkg / "adapter.py").write_text("from otherwheel import y\nx = 1\n")
    graph = asset_imports.import_graph("pkg.handler", [pkg])
    assert set(graph.third_party) == {"somewheel", "otherwheel"}
    assert {"pkg.handler", "pkg.logic", "pkg.adapter"} <= graph.first_party
    (tmp_path / "asset").mkdir()
    assert set(asset_imports.missing_from_asset(graph, tmp_path / "asset")) == {"somewheel", "otherwheel"}


def test_the_db_users_function_needs_only_the_runtime():
    asset = db_users.build_asset(seed_demo_data=False)
    graph = asset_imports.import_graph("handler", [asset.path / "handler.py"])
    assert set(graph.third_party) <= asset_imports.RUNTIME_PROVIDED
