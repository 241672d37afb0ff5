"""Stop decisions inside the frameworks users already run: each submodule attaches stopwise's deciders (a stop
guard, guardrails, the guardian) to one peer's agent through that peer's public extension points, and records
their decisions in a stopwise store. Import the submodule for your framework (it needs that framework's extra):

- ``stopwise.integrations.pydantic_ai`` (extra ``pydantic-ai``): one capability;
- ``stopwise.integrations.openai_agents`` (extra ``openai-agents``): the SDK's guardrails and approvals;
- ``stopwise.integrations.langgraph`` (extra ``langgraph``): a finish node and a tool node, ``interrupt()``.

Nothing here is imported by ``import stopwise``.
"""

from stopwise.integrations._base import (
    CallVerdict,
    Deciders,
    FinishVerdict,
    InputVerdict,
    PeerRun,
    ResultVerdict,
    RunFailed,
)

__all__ = ["CallVerdict", "Deciders", "FinishVerdict", "InputVerdict", "PeerRun", "ResultVerdict", "RunFailed"]
