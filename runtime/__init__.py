"""WeAct runtime: resident adapters, load_lora/offload_lora, policies, KV-cache rebuild.

`import runtime` loads neither torch nor vLLM; engines load them on first use.
"""
