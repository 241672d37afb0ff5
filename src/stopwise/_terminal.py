"""Terminal-safe text: what the command line does to every stored string before printing it.

A session id, an agent name, a model's answer or an error message comes from the log, and the log holds what
callers and models wrote (a tool result can be a web page an attacker wrote). Printed as it is, an escape
sequence would reach the terminal (recolour it, move the cursor, clear the screen, set the window title, write
the clipboard with OSC 52, draw an OSC 8 link), a newline, carriage return or backspace could forge or overwrite a
table row, a bidirectional control could reorder what the terminal shows ("Trojan Source"), and an invisible
character (a zero-width space, a Unicode tag character) could hide text. ``terminal_safe`` writes such characters
as visible escapes instead; ``json_safe`` does the same inside a JSON document, with JSON's own escapes.
"""

from __future__ import annotations

import re

__all__ = ["HIDDEN_IN_TEXT", "json_safe", "terminal_safe"]

# Printed as escapes:
# - C0 controls (newline and tab included: one stored value must stay on one line and in one column), DEL and C1
#   controls (an 8-bit CSI starts a sequence too);
# - the line and paragraph separators;
# - every bidirectional control (Unicode's Bidi_Control: the marks U+061C, U+200E, U+200F, the embeddings and
#   overrides U+202A..U+202E, the isolates U+2066..U+2069);
# - the format characters that draw nothing: soft hyphen, Mongolian vowel separator, zero-width space, word
#   joiner and invisible operators, the deprecated format controls U+206A..U+206F, the byte order mark, the
#   interlinear annotation controls, shorthand and musical format controls, and the tag characters (which can
#   carry a whole hidden sentence). The zero-width joiner and non-joiner (U+200C, U+200D) stay: emoji and
#   several scripts need them inside words, and they hide no text of their own;
# - lone surrogates, which a UTF-8 stream cannot encode (printing one would raise);
# - the backslash, so an escape in the output can only come from here.
_BEYOND_C0 = (
    "\\x7f-\\x9f\\xad\\u061c\\u180e\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f"
    "\\ufeff\\ufff9-\\ufffb\\ud800-\\udfff\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a\\U000e0001"
    "\\U000e0020-\\U000e007f"
)
_UNSAFE = re.compile(f"[\\\\\\x00-\\x1f{_BEYOND_C0}]")
_UNSAFE_IN_JSON = re.compile(f"[{_BEYOND_C0}]")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw that a terminal must not get: the same set but the
backslash (JSON's own escape) and the C0 controls (JSON escapes them in strings; outside them, its newlines and
indentation are layout)."""
HIDDEN_IN_TEXT = re.compile(f"[\\x00-\\x08\\x0b-\\x1f{_BEYOND_C0}]")
"""The characters ``terminal_safe`` escapes but the backslash, the newline and the tab: what a text block that
keeps its lines (the HTML report's) must still show as escapes."""
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character, bidi control, invisible format character, lone surrogate and
    backslash written as an escape (``\\x1b``, ``\\n``, ``\\u202e``, ``\\U000e0041``, ``\\\\``); everything
    else, non-ASCII letters and emoji included, unchanged. The result holds no character a terminal acts on."""
    return _UNSAFE.sub(_escape, text)


def json_safe(document: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) with the characters ``terminal_safe`` escapes
    written as JSON ``\\uXXXX`` escapes: the same JSON value when parsed, and nothing a terminal acts on when
    printed. Only string contents can hold such characters, and there a ``\\u`` escape means the character."""
    return _UNSAFE_IN_JSON.sub(_json_escape, document)
