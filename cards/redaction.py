"""Deterministic text sanitising: normalise, then replace secret-looking spans with placeholders.

`redact` first bounds the input, removes terminal escape sequences, C0/C1 controls (tab and
newline aside) and invisible format characters (zero-width, bidirectional overrides, tag
characters), turns CRLF, CR and Unicode line separators into LF and applies NFC. Only then does
it match, so a secret cannot hide behind a zero-width space. Each match becomes a fixed
`[redacted:<kind>]` placeholder that no pattern matches, so redacting twice changes nothing.

Every pattern is linear-time on hostile input: quantifiers are bounded or possessive, and each
alternative starts at a literal or behind a boundary lookbehind, so no start position rescans a
long run.

Regex redaction is NOT a complete data-loss-prevention system. It finds common shapes only:
bearer and authorization headers, well-known API-key prefixes, `key = value` assignments of
secret-sounding names, PEM private keys, connection strings and URLs with credentials, JWTs,
absolute paths and e-mail addresses. It misses secrets without a recognisable shape, paths that
contain spaces, relative paths, raw SQL or source code, and anything split across fields. Callers
must keep such content out of text that leaves the machine (spec §11.2, §29.3).
"""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass

from cards.errors import InvalidInput

MAX_REDACT_CHARS = 50_000
_MAX_PASSES = 4


class RedactionKind(enum.StrEnum):
    """What a placeholder replaced; the name never contains a pattern keyword."""

    PRIVATE_KEY = "private_key"
    JWT = "jwt"
    BEARER = "bearer"
    CONNECTION_STRING = "connection_string"
    API_KEY = "api_key"
    CREDENTIAL = "credential"
    ENV = "env"
    PATH = "path"
    EMAIL = "email"


def placeholder(kind: RedactionKind) -> str:
    """The fixed text that replaces a span of `kind`."""
    return f"[redacted:{kind.value}]"


_PLACEHOLDER = re.compile(r"\[redacted:[a-z_]{1,32}\]")
_NOT_PLACEHOLDER = r"(?!\[redacted:)"

# Shared pieces. `_B` forbids starting inside a token: it is what keeps each alternative from
# being retried at every position of a long run.
_B = r"(?<![A-Za-z0-9_-])"
_PATH_CHARS = r"[^\s\"'`<>|,;]"
_QUOTED = r"(?:\"[^\"\n]{0,1024}+\"|'[^'\n]{0,1024}+')"
_VALUE = rf"(?:{_QUOTED}|{_NOT_PLACEHOLDER}[^\s\"',;]++)"
_PEM_LINE = r"PRIVATE KEY[ A-Z0-9]{0,20}-----"
_PEM_END = rf"-----END[ A-Z0-9]{{0,40}}{_PEM_LINE}"
_SECRET_WORDS = (
    r"api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|secret[_-]?key"
    r"|client[_-]?secret|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token"
    r"|session[_-]?token|token|secret|password|passwd|pwd|passphrase|credentials?"
)
_DB_SCHEMES = (
    r"postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle"
    r"|snowflake|clickhouse|cockroachdb|couchdb|cassandra|neo4j(?:\+s)?|bolt|kafka|ldaps?"
    r"|sftp|ftps?|smb"
)
_STORAGE_SCHEMES = r"file|s3a?|gs|gcs|az|abfss?|wasbs?|hdfs|dbfs"
_CONN_KEYS = (
    r"server|data[ ]source|datasource|host|hostname|address|addr|network[ ]address"
    r"|endpoint|defaultendpointsprotocol|accountname"
)
_KEY_PREFIXES = (
    r"sk-[A-Za-z0-9_-]{12,}+|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}+"
    r"|whsec_[A-Za-z0-9]{8,}+|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+"
    r"|glpat-[A-Za-z0-9_-]{20,}+|xox[abprs]-[A-Za-z0-9-]{8,}+|xapp-[A-Za-z0-9-]{8,}+"
    r"|AIza[A-Za-z0-9_-]{30,}+|hf_[A-Za-z0-9]{30,}+|npm_[A-Za-z0-9]{30,}+"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])"
)

# Order matters only between alternatives that can start at the same position.
_PATTERNS: tuple[tuple[RedactionKind, str], ...] = (
    (
        RedactionKind.PRIVATE_KEY,
        rf"-----BEGIN[ A-Z0-9]{{0,40}}{_PEM_LINE}(?:(?!{_PEM_END})[\s\S])*+(?:{_PEM_END})?",
    ),
    (RedactionKind.JWT, rf"{_B}eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"),
    (
        RedactionKind.BEARER,
        rf"{_B}(?i:(?:proxy-)?authorization|set-cookie|cookie)[\"']?[ \t]{{0,8}}[:=][ \t]{{0,8}}"
        rf"(?:{_QUOTED}|[^\n]++)",
    ),
    (RedactionKind.BEARER, rf"{_B}(?i:bearer)[ \t]{{1,8}}[A-Za-z0-9._~+/-]{{6,}}+=*+"),
    (
        RedactionKind.CONNECTION_STRING,
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s/?#@\"'<>]{1,256}+@[^\s\"'<>]*+",
    ),
    (
        RedactionKind.CONNECTION_STRING,
        rf"(?<![A-Za-z0-9+.-])(?:jdbc:)?(?i:{_DB_SCHEMES})://[^\s\"'<>]*+",
    ),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9+.-])(?i:{_STORAGE_SCHEMES}):/{{1,3}}{_PATH_CHARS}*+"),
    (
        RedactionKind.CONNECTION_STRING,
        rf"(?<![A-Za-z0-9_])(?i:{_CONN_KEYS})[ \t]{{0,4}}=[^;\n]{{0,256}}+;[^\n]*+",
    ),
    (RedactionKind.API_KEY, rf"{_B}(?:{_KEY_PREFIXES})"),
    (RedactionKind.CREDENTIAL, rf"(?i:{_SECRET_WORDS})[\"']?[ \t]{{0,8}}[:=][ \t]{{0,8}}{_VALUE}"),
    (
        RedactionKind.ENV,
        r"(?<![A-Za-z0-9_])(?:export[ \t]{1,8}+[A-Za-z_][A-Za-z0-9_]{0,63}+"
        r"|[A-Z][A-Z0-9]{0,31}+(?:_[A-Z0-9]{1,31}+){1,7}+)"
        rf"[ \t]{{0,4}}=[ \t]{{0,4}}{_VALUE}",
    ),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9])[A-Za-z]:[\\/]{_PATH_CHARS}*+"),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9\\])\\\\[^\s\\/\"'<>|]{{1,255}}+\\{_PATH_CHARS}*+"),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9_.~/\\-])~[A-Za-z0-9_.-]{{0,32}}+/{_PATH_CHARS}*+"),
    (
        RedactionKind.PATH,
        rf"(?<![A-Za-z0-9_.~/\\-])/[^\s\"'`<>|,;/]{{1,255}}+/{_PATH_CHARS}*+",
    ),
    (
        RedactionKind.EMAIL,
        r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}+@[A-Za-z0-9][A-Za-z0-9-]{0,62}+"
        r"(?:\.[A-Za-z0-9-]{1,63}+)++",
    ),
)

# Only top-level named groups, so `Match.lastgroup` names the alternative that matched.
_SECRETS = re.compile("|".join(f"(?P<k{i}>{pattern})" for i, (_, pattern) in enumerate(_PATTERNS)))
_KIND_BY_GROUP = {f"k{i}": kind for i, (kind, _) in enumerate(_PATTERNS)}

_ANSI = re.compile(
    r"\x1b\[[0-?]{0,64}+[ -/]{0,16}+[@-~]|\x9b[0-?]{0,64}+[ -/]{0,16}+[@-~]"
    r"|\x1b\][^\x07\x1b\n]{0,1024}+(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
_NEWLINES = re.compile(r"\r\n?|[\x85\u2028\u2029]")
# Controls, plus format characters that render as nothing but can split a secret or smuggle
# text past a reader: zero-width, bidirectional overrides and isolates, BOM, tag characters.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
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
        text, replaced = _SECRETS.subn(lambda m: _replace(m, counts), text)
        if not replaced:
            break
    by_kind = tuple(sorted(counts.items()))
    return RedactionResult(text, sum(counts.values()), by_kind, truncated)


def remove_placeholders(text: str) -> str:
    """`text` without its redaction placeholders, to judge what content is left."""
    return _PLACEHOLDER.sub("", text)


def _replace(match: re.Match[str], counts: dict[RedactionKind, int]) -> str:
    kind = _KIND_BY_GROUP[str(match.lastgroup)]
    counts[kind] = counts.get(kind, 0) + 1
    return placeholder(kind)


def _bound(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    # Cutting inside a token could leave a secret's prefix too short for its pattern.
    last_space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    return (cut[:last_space] if last_space > 0 else cut), True
