"""The orchestrator's per-call time budget is the tool's row in the catalog
(``ToolSpec.timeout_s``); the synthesized Lambda must time out at exactly that,
or a call could outlive the budget the orchestrator gave it."""

from __future__ import annotations

import pytest

from cadencia_shared.catalog import TOOLS
from infra.contract import Ids

pytestmark = pytest.mark.infra


def test_each_tool_lambda_times_out_at_the_catalogs_budget(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        for tool in TOOLS.values():
            timeout = synth.resources[Ids.function(tool)]["Properties"]["Timeout"]
            assert timeout == tool.timeout_s, (tool.name, timeout, tool.timeout_s)
