"""Task generation: the offline procedural generator (``procedural``) and its task
families (``families``); the LLM generator of the paper lives beside them."""
