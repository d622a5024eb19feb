"""How the orchestrator reaches a tool: one interface, two implementations with
the same JSON contract. ``aws.LambdaInvoker`` calls ``lambda:InvokeFunction``;
``local.InProcessInvoker`` calls the handler in this process, passing the event
and the response through JSON exactly as Lambda would. The AWS path never
imports tool code; only the local one does, and only when it is chosen."""

from .base import Invocation, InvocationStatus, ToolInvoker

__all__ = ["Invocation", "InvocationStatus", "ToolInvoker"]
