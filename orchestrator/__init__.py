"""The orchestrator: the Claude tool-use loop (loop.py, steps.py, tool_round.py), and the
controls (controls.py) that decide — in code, before any tool runs — whether the model's
request may be carried out."""
