"""Deterministic text sanitising: normalise, then replace secret-looking spans with placeholders.

`redact` first bounds the input, removes terminal escape sequences, C0/C1 controls (tab and
newline aside) and every invisible character: all of Unicode category Cf (zero-width, bidi
controls, tag characters), every Default_Ignorable code point (variation selectors, the combining
grapheme joiner, Mongolian free variation selectors, Hangul fillers) and the braille blank. It
turns CRLF, CR and Unicode line separators into LF and applies NFC. Patterns then match a
compatibility-folded view (NFKC, character by character) whose spans map back to the text, so a
fullwidth or mathematical-alphanumeric secret is found while other text keeps its form. Each
match becomes a fixed `[redacted:<kind>]` placeholder that no pattern matches, so redacting
twice changes nothing.

Every pattern is linear-time on hostile input: quantifiers are bounded or possessive, and each
alternative starts at a literal or behind a boundary lookbehind, so a failed attempt rescans at
most a bounded window (8 KiB for a JWT glued to a word, 2 KiB otherwise), never a whole run.

Regex redaction is NOT a complete data-loss-prevention system. It finds common shapes only:
bearer and authorization headers; well-known API-key prefixes, also glued to a word by `_` or
`-`; bare 40-character AWS-style secret keys; `key = value` assignments and "the password is
..." phrasing for secret-sounding names; PEM private keys with or without their header lines;
connection strings and URLs with credentials (a password may hold `#`, `?` or `/`); signatures
and secret parameters of presigned URLs; JWTs; absolute, home, `$VAR`/`%VAR%` and Windows
paths (directory names may hold spaces), home directories named without a leading separator
(`Users/alice/...`) and `/root`; IPv4 and IPv6 addresses; e-mail addresses in any script
(`josé@correo.es`, `张伟@例子.公司`); incoming-webhook URLs (Slack, Discord, Teams, Google
Chat); a secret's name followed by a long token holding a digit ("api token 3f9a..."); a PIN of
4 to 12 digits ("my PIN is 4821", "PIN: 4821"). It misses
secrets without a recognisable shape (a plain word used as a password, unless a phrase names
it), secrets split by visible characters or across fields, file names with spaces outside
quotes, relative paths, host names, raw SQL or source code. It over-redacts too: a 40-character
mixed-case identifier, a four-part version such as `1.2.3.4`, hex pairs such as `a::b`, the
word after "the token is", and in scripts written without spaces, the words glued in front of
an e-mail address. Callers must keep such content out of text that leaves the machine
(Honcho spec §11.2, §29.3).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cards._secret_patterns import (
    KIND_BY_GROUP,
    PLACEHOLDER,
    SECRETS,
    RedactionKind,
    placeholder,
)
from cards.errors import InvalidInput

MAX_REDACT_CHARS = 50_000
_MAX_PASSES = 4
# Folds longer than this are Arabic phrase ligatures (U+FDFA, U+FDFB): no ASCII secret hides in
# them, and unfolded they cannot make the matching view 18 times as long as the input.
_MAX_FOLD = 6


_ANSI = re.compile(
    r"\x1b\[[0-?]{0,64}+[ -/]{0,16}+[@-~]|\x9b[0-?]{0,64}+[ -/]{0,16}+[@-~]"
    r"|\x1b\][^\x07\x1b\n]{0,1024}+(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
_NEWLINES = re.compile(r"\r\n?|[\x85\u2028\u2029]")
# Controls, plus characters that render as nothing but can split a secret or smuggle text past
# a reader: category Cf (Unicode 15.1), the Default_Ignorable code points (variation selectors,
# combining grapheme joiner, Mongolian selectors, Hangul fillers, tags) and the braille blank.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


@dataclass(frozen=True, slots=True)
class RedactionResult:
    """Sanitised text and what was replaced in it.

    Attributes:
        text: NFC, LF-only text with no controls other than tab and newline.
        redactions: the number of replacements (a span absorbed by a later pass counts twice).
        by_kind: replacement counts per kind, sorted by kind, kinds with no replacement left out.
        truncated: whether the input was longer than the bound and was cut.
    """

    text: str
    redactions: int
    by_kind: tuple[tuple[RedactionKind, int], ...]
    truncated: bool

    def count(self, kind: RedactionKind) -> int:
        """How many spans of `kind` were replaced."""
        return dict(self.by_kind).get(kind, 0)


def normalise_text(text: str, *, single_line: bool = False) -> str:
    """Strip escapes, controls and invisible characters; LF line endings; NFC.

    With `single_line`, every run of whitespace (newlines too) becomes one space and the ends
    are stripped.
    """
    text = _ANSI.sub("", text)
    text = _NEWLINES.sub("\n", text)
    text = _INVISIBLE.sub("", text)
    if single_line:
        text = " ".join(text.split())
    return unicodedata.normalize("NFC", text)


def redact(
    text: str, *, max_chars: int = MAX_REDACT_CHARS, single_line: bool = False
) -> RedactionResult:
    """Bound, normalise and redact `text`, deterministically.

    The bound applies to the input: a longer input is cut at its last whitespace before
    `max_chars`, so a token split by the cut is dropped rather than left as a prefix too short
    for its pattern. Placeholders may make the output a little longer than the input.
    Redacting the output again changes nothing while it fits the bound.

    Args:
        text: untrusted text.
        max_chars: the most input characters to keep.
        single_line: collapse all whitespace to single spaces (for titles, labels, tags).

    Raises:
        InvalidInput: `max_chars` is not positive.
    """
    if max_chars < 1:
        raise InvalidInput("max_chars must be positive")
    text, truncated = _bound(text, max_chars)
    text = normalise_text(text, single_line=single_line)
    counts: dict[RedactionKind, int] = {}
    for _ in range(_MAX_PASSES):
        # A second pass is rarely needed: only when one match hid the start of another, as an
        # e-mail address does for a path that follows it without a space.
        text, replaced = _redact_pass(text, counts)
        if not replaced:
            break
    by_kind = tuple(sorted(counts.items()))
    return RedactionResult(text, sum(counts.values()), by_kind, truncated)


def remove_placeholders(text: str) -> str:
    """`text` without its redaction placeholders, to judge what content is left."""
    return PLACEHOLDER.sub("", text)


def _replace(match: re.Match[str], counts: dict[RedactionKind, int]) -> str:
    kind = KIND_BY_GROUP[str(match.lastgroup)]
    counts[kind] = counts.get(kind, 0) + 1
    return placeholder(kind)


def _redact_pass(text: str, counts: dict[RedactionKind, int]) -> tuple[str, int]:
    if unicodedata.is_normalized("NFKC", text):
        return SECRETS.subn(lambda m: _replace(m, counts), text)
    view, origin = _folded(text)
    pieces: list[str] = []
    done = 0
    replaced = 0
    for match in SECRETS.finditer(view):
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        # Two matches can share one folded character ("¼" is "1⁄4"): the slice is then empty
        # and the two placeholders meet.
        pieces += (text[done:start], _replace(match, counts))
        done = max(done, end)
        replaced += 1
    pieces.append(text[done:])
    return "".join(pieces), replaced


def _folded(text: str) -> tuple[str, list[int]]:
    """NFKC of each character, and for each folded character the index it came from."""
    parts: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        folded = char if char < "\x80" else unicodedata.normalize("NFKC", char)
        if len(folded) > _MAX_FOLD:
            folded = char
        parts.append(folded)
        origin.extend([index] * len(folded))
    return "".join(parts), origin


def _bound(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    # Cutting inside a token could leave a secret's prefix too short for its pattern.
    last_space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    return (cut[:last_space] if last_space > 0 else cut), True


def outbound_query(text: str, max_chars: int) -> str | None:
    """`text` as a query may leave the machine: bounded, one line, redacted.

    None when nothing but redactions is left: then nothing is sent at all.
    """
    redacted = redact(text, max_chars=max_chars, single_line=True).text
    return redacted if remove_placeholders(redacted).strip() else None
