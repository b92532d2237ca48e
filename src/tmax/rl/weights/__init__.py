"""The trainer's weights on their way out after a step: gathered one bucket at a time
(streaming) and sent into vLLM's workers (transfer)."""
