"""Where runs execute: the local asyncio ``Runner`` (a DBOS runtime comes with the ``dbos`` extra)."""

from stopwise.runtime.local import Runner, SessionBusy

__all__ = ["Runner", "SessionBusy"]
