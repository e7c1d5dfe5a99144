"""The display-text rules every card field of text shares, as pattern bodies and whole patterns.

No C0/C1 control (tab and newline allowed in multi-line text) and at least one non-space
character. `cards.model` checks a tool's arguments by the same bodies.
"""

from __future__ import annotations

from cards.structs import whole

NO_CONTROL = r"[^\x00-\x1f\x7f-\x9f]"
NO_CONTROL_ML = r"[^\x00-\x08\x0b-\x1f\x7f-\x9f]"
_VISIBLE = r"[^\s\x00-\x1f\x7f-\x9f]"
LINE_BODY = rf"{NO_CONTROL}*{_VISIBLE}{NO_CONTROL}*"
TEXT_BODY = rf"{NO_CONTROL_ML}*{_VISIBLE}{NO_CONTROL_ML}*"

LINE = whole(LINE_BODY)
TEXT = whole(TEXT_BODY)
