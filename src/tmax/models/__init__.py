"""Model access: the tiny offline Qwen3, OpenAI-compatible servers and the chat client."""
