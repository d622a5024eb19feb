"""The WhatsApp channel: the signed webhook in, identity bound by the channel,
the ordered queue to the orchestrator, and the reply out exactly once."""
