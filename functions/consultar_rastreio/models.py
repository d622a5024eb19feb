from __future__ import annotations

from cadencia_shared.models import ToolRequest, TrackingArguments


class TrackingRequest(ToolRequest, TrackingArguments):
    """The model's arguments plus the identity the orchestrator injects."""
