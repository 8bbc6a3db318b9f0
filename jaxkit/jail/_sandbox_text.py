"""Text a candidate wrote, made safe to show: terminal escape sequences removed, other
control and invisible format characters escaped, lone surrogates kept as escapes
(:func:`clean_text`; used by :mod:`jaxkit.jail.sandbox` on every error it reports)."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean_text"]

# ECMA-48 sequences: CSI (7- and 8-bit), OSC / DCS / SOS / PM / APC strings up to their
# terminator (BEL or ST) or the end of the text, and two-byte escapes
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?")


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(text: str) -> str:
    """``text`` safe to print on a terminal or in a report: terminal escape sequences
    removed whole (cursor moves, clear screen, colours, OSC-8 links, window titles), every
    other control character (C0 but tab and newlines, DEL, C1) and every invisible
    format character (bidirectional overrides, zero-width characters) shown as a
    ``\\xNN`` / ``\\uXXXX`` escape, and lone surrogates as ``\\udXXX`` escapes (so the
    result always encodes as UTF-8)."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    text = _ESCAPES.sub("", text)
    return "".join(_escape_char(ch) if ch not in "\t\n\r" and
                   unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text)
