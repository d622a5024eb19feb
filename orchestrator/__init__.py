"""The orchestrator: the Claude tool-use loop, and the gates that decide — in
code, before any tool runs — whether the model's request may be carried out."""
