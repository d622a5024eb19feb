"""Context values: defaults come from one place; a Bedrock deploy names its model."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, from_context
from orchestrator.settings import OrchestratorSettings


def _ctx(values):
    return from_context(values.get)


def test_anthropic_default_model_is_the_orchestrators_default():
    assert _ctx({}).model_id == OrchestratorSettings.model_fields["model_id"].default


def test_bedrock_requires_an_explicit_model_id():
    with pytest.raises(ConfigError, match="modelId"):
        _ctx({"modelProvider": "bedrock"})
    assert _ctx({"modelProvider": "bedrock", "modelId": "us.anthropic.x-v1:0"}).model_id == "us.anthropic.x-v1:0"


def test_tool_concurrency_defaults_to_each_registry_row_and_overrides_by_name():
    from cadencia_shared.catalog import TOOLS

    assert dict(_ctx({}).tool_concurrency) == {name: spec.reserved_concurrency for name, spec in TOOLS.items()}
    overridden = _ctx({"toolConcurrency": '{"emitir_reembolso": 2}'}).tool_concurrency
    assert overridden["emitir_reembolso"] == 2
    assert overridden["consultar_status_pedido"] == TOOLS["consultar_status_pedido"].reserved_concurrency


@pytest.mark.parametrize("value", ['{"outra_ferramenta": 1}', '{"emitir_reembolso": "5"}', '{"emitir_reembolso": true}',
                                   '{"emitir_reembolso": 2.5}', '{"emitir_reembolso": -1}'])
def test_tool_concurrency_refuses_unknown_tools_and_non_integers(value):
    with pytest.raises(ConfigError, match="toolConcurrency"):
        _ctx({"toolConcurrency": value})
