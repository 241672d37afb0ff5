"""Guardrails: four hooks (input, tool call, tool result, output), three verdicts (pass, block, rewrite).

A guardrail is a plain function (sync or async) of its hook's context returning ``None``/``Pass()``,
``Block(reason)`` or ``Rewrite(...)``. The built-ins live here too, imported when first named (their pattern
tables are not paid for by ``import stopwise``).
"""

from typing import TYPE_CHECKING

from stopwise._lazy import lazy
from stopwise.guardrails.hooks import (
    GuardrailContext,
    Guardrails,
    InputContext,
    OutputContext,
    ToolCallContext,
    ToolResultContext,
    named,
)
from stopwise.guardrails.verdicts import Block, GuardrailError, GuardrailRecord, GuardrailTimeout, Hook, Pass, Rewrite

if TYPE_CHECKING:
    from stopwise.guardrails.builtins import (
        PROMPT_INJECTION_POLICY,
        block_injected_results,
        block_pii,
        max_output_length,
        max_tool_result_length,
        prompt_injection_guardrail,
        redact_pii,
        redact_secrets,
    )

__all__ = [
    "PROMPT_INJECTION_POLICY",
    "Block",
    "GuardrailContext",
    "GuardrailError",
    "GuardrailRecord",
    "GuardrailTimeout",
    "Guardrails",
    "Hook",
    "InputContext",
    "OutputContext",
    "Pass",
    "Rewrite",
    "ToolCallContext",
    "ToolResultContext",
    "block_injected_results",
    "block_pii",
    "max_output_length",
    "max_tool_result_length",
    "named",
    "prompt_injection_guardrail",
    "redact_pii",
    "redact_secrets",
]

__getattr__ = lazy(
    __name__,
    dict.fromkeys(
        (
            "PROMPT_INJECTION_POLICY",
            "block_injected_results",
            "block_pii",
            "max_output_length",
            "max_tool_result_length",
            "prompt_injection_guardrail",
            "redact_pii",
            "redact_secrets",
        ),
        "stopwise.guardrails.builtins",
    ),
)
