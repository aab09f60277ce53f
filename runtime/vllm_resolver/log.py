"""The plugin's loggers sit under vLLM's `vllm` logger, so their lines go through vLLM's
handler in vLLM's format (`INFO 12-03 10:01:02 [source.py:88] ...`, with the process name)
and obey `VLLM_LOGGING_LEVEL`; `vllm.logger.init_logger` does no more than `getLogger`
plus helpers, and the plugin's pure modules must import without vLLM.
"""

from __future__ import annotations

import logging

PREFIX = "vllm.weact_registry"


def get_logger(module: str) -> logging.Logger:
    return logging.getLogger(f"{PREFIX}.{module.rsplit('.', 1)[-1]}")
