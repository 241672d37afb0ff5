"""Loading a caller's agent from a Python file, for ``stopwise run FILE.py:NAME``."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from stopwise.agent import Agent
from stopwise.errors import ConfigError, StopwiseError
from stopwise.models import resolve_model

__all__ = ["MAX_AGENT_FILE_BYTES", "LoadError", "load_agent", "with_model"]

MAX_AGENT_FILE_BYTES = 4_000_000
"""The largest agent file ``load_agent`` imports. Compiling Python takes about 250 times the file's size in memory
(a 48 MB file: 11 GB and a minute), so a file this large is refused before it is read: an agent file defines an
agent and imports the rest."""


class LoadError(StopwiseError):
    """The agent named by ``FILE.py:NAME`` cannot be loaded; the message says why, on one line."""


def load_agent(target: str) -> Agent:
    """Import ``FILE.py`` (as a fresh module, its folder first on ``sys.path`` so it can import its neighbours)
    and return its attribute ``NAME``, which must be an ``Agent``.

    Raises ``LoadError`` for a target that is not ``FILE.py:NAME``, a missing file, a file over
    ``MAX_AGENT_FILE_BYTES``, a file that raises while it is imported (a ``ConfigError`` of an agent it defines
    included), a missing attribute or one that is not an ``Agent``.
    """
    file, colon, name = target.rpartition(":")  # the last colon: a Windows path has one of its own
    if not colon or not file or not name.isidentifier():
        raise LoadError(f"{target!r}: expected FILE.py:NAME, e.g. agents.py:agent")
    path = Path(file)
    if not path.is_file():
        raise LoadError(f"{file}: no such file" if not path.exists() else f"{file}: not a file")
    size = path.stat().st_size
    if size > MAX_AGENT_FILE_BYTES:
        raise LoadError(
            f"{file}: {size:,} bytes, over the {MAX_AGENT_FILE_BYTES:,} an agent file may have; define the agent in a "
            "small file that imports the rest"
        )
    module = _import(path)
    try:
        value = getattr(module, name)
    except AttributeError:
        raise LoadError(f"{file} has no attribute {name!r}; {_agents_in(module)}") from None
    if not isinstance(value, Agent):
        raise LoadError(f"{target} is of type {type(value).__name__}, expected an Agent; {_agents_in(module)}")
    return value


def _agents_in(module: object) -> str:
    """Which names of the module are Agents, for a message that helps the user pick one."""
    names = sorted(key for key, value in vars(module).items() if isinstance(value, Agent))
    if not names:
        # the usual cause: the agent is built inside a function or under ``if __name__ == "__main__":``
        return "it defines no Agent at module level (one made inside a function is not seen)"
    return "its Agents: " + ", ".join(names)


def with_model(agent: Agent, spec: str) -> Agent:
    """The agent with its model replaced by the one a model string names (``ConfigError`` if it cannot be)."""
    return dataclasses.replace(agent, model=resolve_model(spec))


def _import(path: Path) -> ModuleType:
    module_name = f"_stopwise_user_{path.stem}_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: dataclasses and pydantic look their module up by name.
    sys.modules[module_name] = module
    # Left in place: the file's tools may import their neighbours later, while the agent runs.
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        # A script that runs its main code on import: the CLI must not exit with the script's status unexplained.
        del sys.modules[module_name]
        raise LoadError(
            f"importing {path} called sys.exit({exc.code!r}): guard the file's script code with "
            "if __name__ == '__main__':"
        ) from exc
    except Exception as exc:
        del sys.modules[module_name]
        if isinstance(exc, ConfigError):
            raise LoadError(f"{path}: {_one_line(str(exc))}") from exc
        raise LoadError(f"importing {path} raised {type(exc).__name__}: {_one_line(str(exc))}") from exc
    return module


def _one_line(text: str) -> str:
    return " ".join(text.split())
