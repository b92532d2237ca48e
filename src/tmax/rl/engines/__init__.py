"""Inference engines for rollouts: in-process transformers (local), vLLM's servers
(remote) and the plugin vLLM loads in them (vllm_plugin)."""
