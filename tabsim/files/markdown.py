"""Markdown written from data: text that came from an input file is made safe for a table cell."""
from __future__ import annotations


def md(text) -> str:
    """Text from the inputs, safe inside a Markdown table cell or a list item: ``|`` and line breaks escaped."""
    s = "" if text is None else str(text)
    s = s.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(s.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
