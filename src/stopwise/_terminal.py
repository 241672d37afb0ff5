"""Terminal-safe text: what the command line does to every stored string before printing it.

A session id, an agent name, a model's answer or an error message comes from the log, and the log holds what
callers and models wrote. Printed as it is, an escape sequence would reach the terminal (recolour it, move the
cursor, set the window title, hide text) and a newline or carriage return could forge a table row.
``terminal_safe`` writes such characters as visible escapes instead.
"""

from __future__ import annotations

import re

__all__ = ["terminal_safe"]

# C0 controls (newline and tab included: one stored value must stay on one line and in one column), DEL, C1
# controls (an 8-bit CSI starts a sequence too), the line and paragraph separators, and the bidirectional
# embeddings, overrides and isolates, which reorder what the terminal shows ("Trojan Source"). The backslash is
# escaped as well, so an escape in the output can only come from here.
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character, bidi control and backslash written as an escape (``\\x1b``,
    ``\\n``, ``\\u202e``, ``\\\\``); everything else, non-ASCII letters included, unchanged."""
    return _UNSAFE.sub(_escape, text)
