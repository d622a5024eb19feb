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
