"""The shapes `cards.redaction` replaces: one regular expression per kind of secret, combined.

Every pattern is linear-time on hostile input: quantifiers are bounded or possessive, and each
alternative starts at a literal or behind a boundary lookbehind. What the shapes find and miss
is said in `cards.redaction`.
"""

from __future__ import annotations

import enum
import re


class RedactionKind(enum.StrEnum):
    """What a placeholder replaced; the name never contains a pattern keyword."""

    PRIVATE_KEY = "private_key"
    JWT = "jwt"
    BEARER = "bearer"
    CONNECTION_STRING = "connection_string"
    URL_SECRET = "url_secret"
    API_KEY = "api_key"
    CREDENTIAL = "credential"
    ENV = "env"
    PATH = "path"
    EMAIL = "email"
    IP_ADDRESS = "ip_address"


def placeholder(kind: RedactionKind) -> str:
    """The fixed text that replaces a span of `kind`."""
    return f"[redacted:{kind.value}]"


PLACEHOLDER = re.compile(r"\[redacted:[a-z_]{1,32}\]")
_NOT_PLACEHOLDER = r"(?!\[redacted:)"

# Shared pieces. `_B` forbids starting inside a token: it is what keeps each alternative from
# being retried at every position of a long run. `_G` lets a key start after `_` or `-` (glued
# to a word, `key_AKIA...`); it is used only where a failed attempt scans a bounded window.
_B = r"(?<![A-Za-z0-9_-])"
_G = r"(?<![A-Za-z0-9])"
_PATH_CHARS = r"[^\s\"'`<>|,;]"
_QUOTED = r"(?:\"[^\"\n]{0,1024}+\"|'[^'\n]{0,1024}+')"
_VALUE = rf"(?:{_QUOTED}|{_NOT_PLACEHOLDER}[^\s\"',;]++)"
_PEM_LINE = r"PRIVATE KEY[ A-Z0-9]{0,20}-----"
_PEM_END = rf"-----END[ A-Z0-9]{{0,40}}{_PEM_LINE}"
_SECRET_WORDS = (
    r"api[ _-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|secret[_-]?key"
    r"|client[_-]?secret|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token"
    r"|session[_-]?token|token|secret|password|passwd|pwd|passphrase|passcode|credentials?"
)
# Words between a secret's name and its value in prose: "the password is now x".
_LINKS = r"is|was|were|are|be|been|now|still|just|set|to|became|becomes|reads|equals"
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
# Query parameters whose value is a credential or a signature (presigned S3, GCS, Azure SAS).
_SIGNED = r"x-(?:amz|goog)-(?:signature|credential|security-token)|signature"
_QUERY_SECRETS = (
    rf"{_SIGNED}|sig|sas|key|api[_-]?key|apikey|token|access[_-]?token|auth(?:[_-]?token)?"
    r"|id[_-]?token|refresh[_-]?token|session[_-]?token|client[_-]?secret|secret|password"
    r"|passwd|pwd|code"
)
_QUERY_VALUE = rf"{_NOT_PLACEHOLDER}[^&#\s\"'<>]++"
_B64 = r"A-Za-z0-9+/"
# Base64 runs: a PEM body without its header, or an AWS-style secret access key.
_B64_CASES = rf"(?=[{_B64}]{{0,127}}[A-Z])(?=[{_B64}]{{0,127}}[a-z])"
_B64_BODY = (
    rf"(?<![{_B64}=]){_B64_CASES}"
    rf"(?:[{_B64}]{{64,}}+|[{_B64}]{{40,63}}+(?=={{0,2}}\s{{1,8}}+[{_B64}]{{40}}))={{0,2}}"
    rf"(?:\s{{1,8}}+[{_B64}]{{40,}}+={{0,2}})*+(?:\s{{1,8}}+[{_B64}]{{1,39}}+={{0,2}})?"
)
_AWS_SECRET = (
    rf"(?<![{_B64}=])(?=[{_B64}]{{0,39}}[A-Z])(?=[{_B64}]{{0,39}}[a-z])"
    rf"(?=[{_B64}]{{0,39}}[0-9])[{_B64}]{{40}}(?![{_B64}=])"
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rf"(?:{_H}:){{7}}{_H}|{_H}(?::{_H}){{0,5}}::{_H}(?::{_H}){{0,5}}"
    rf"|{_H}(?::{_H}){{1,6}}::|::{_H}(?::{_H}){{1,6}}"
)
# Paths. A directory name may hold spaces: the words after a space are kept only when a
# separator follows them, so prose after a path is left alone.
_SEP = r"[\\/]"
_SEG = r"[^\s\"'`<>|,;/\\]{1,255}+"
_WORD = r"[^\s\"'`<>|,;:/\\]{1,255}+"
_PATH_TAIL = rf"(?:{_SEG}(?:[ ]{_WORD}){{0,7}}{_SEP})*+{_PATH_CHARS}*+"
_ENV_DIR = (
    r"(?:\$(?:env:)?\{?[A-Za-z_][A-Za-z0-9_]{0,63}+\}?|%[A-Za-z_][A-Za-z0-9_()]{0,63}+%)[\\/]"
)
_PATH_START = rf"(?:/|~[A-Za-z0-9_.-]{{0,32}}+{_SEP}|[A-Za-z]:{_SEP}|\\\\|{_ENV_DIR})"
_NOT_IN_PATH = r"(?<![A-Za-z0-9_.~/\\-])"
# E-mail addresses in any script (`josé@correo.es`, `张伟@例子.公司`): word characters, with the
# combining and Indic vowel marks that are not word characters in `re` (`राम@उदाहरण.भारत`).
_MAIL_MARKS = r"\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0dff"
_MAIL_LABEL = rf"[\w{_MAIL_MARKS}-]{{1,63}}+"
_MAIL_LOCAL = rf"(?<![\w{_MAIL_MARKS}.%+-])[\w{_MAIL_MARKS}.%+-]{{1,64}}+"
# Incoming-webhook URLs carry their secret in the path.
_WEBHOOKS = (
    r"hooks\.slack\.com/(?:services|workflows|triggers)|(?:[a-z0-9-]{1,63}+\.)?discord(?:app)?"
    r"\.com/api/webhooks|[a-z0-9-]{1,63}+\.webhook\.office\.com/webhookb2"
    r"|outlook\.office(?:365)?\.com/webhook|chat\.googleapis\.com/v1/spaces"
)

# Order matters only between alternatives that can start at the same position. A lookahead for
# the possible first letters in front of a case-insensitive word list lets most positions fail at
# once, which keeps prose about as fast as it was before the list of classes grew.
_PATTERNS: tuple[tuple[RedactionKind, str], ...] = (
    (
        RedactionKind.PRIVATE_KEY,
        rf"-----BEGIN[ A-Z0-9]{{0,40}}{_PEM_LINE}(?:(?!{_PEM_END})[\s\S])*+(?:{_PEM_END})?",
    ),
    (
        RedactionKind.JWT,
        rf"{_B}eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"
        r"|(?<=[_-])eyJ[A-Za-z0-9_-]{0,1024}+\.eyJ[A-Za-z0-9_-]{0,8192}+\.[A-Za-z0-9_-]*+",
    ),
    (
        RedactionKind.BEARER,
        rf"{_B}(?=[ACPSacps])(?i:(?:proxy-)?authorization|set-cookie|cookie)[\"']?"
        rf"[ \t]{{0,8}}[:=][ \t]{{0,8}}(?:{_QUOTED}|[^\n]++)",
    ),
    (RedactionKind.BEARER, rf"{_B}(?=[Bb])(?i:bearer)[ \t]{{1,8}}[A-Za-z0-9._~+/-]{{6,}}+=*+"),
    (
        RedactionKind.CONNECTION_STRING,
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://"
        r"[^\s/?#@:\"'<>]{0,256}+(?::[^\s@\"'<>]{0,256}+)?@[^\s\"'<>]*+",
    ),
    (
        RedactionKind.CONNECTION_STRING,
        r"(?<![A-Za-z0-9+.-])(?=[ABCFJKLMNOPRSabcfjklmnoprs])"
        rf"(?:jdbc:)?(?i:{_DB_SCHEMES})://[^\s\"'<>]*+",
    ),
    (
        RedactionKind.PATH,
        r"(?<![A-Za-z0-9+.-])(?=[ADFGHSWadfghsw])"
        rf"(?i:{_STORAGE_SCHEMES}):/{{1,3}}{_PATH_CHARS}*+",
    ),
    (
        RedactionKind.CONNECTION_STRING,
        rf"(?<![A-Za-z0-9_])(?=[ADEHNSadehns])(?i:{_CONN_KEYS})"
        r"[ \t]{0,4}=[^;\n]{0,256}+;[^\n]*+",
    ),
    (RedactionKind.URL_SECRET, rf"(?<=[?&;#])(?i:{_QUERY_SECRETS})={_QUERY_VALUE}"),
    (RedactionKind.URL_SECRET, rf"{_B}(?=[SXsx])(?i:{_SIGNED})={_QUERY_VALUE}"),
    (
        RedactionKind.URL_SECRET,
        rf"(?<![A-Za-z0-9.-])(?=[CDHOWcdhow])(?i:(?:https?://)?(?:{_WEBHOOKS}))/[^\s\"'<>]*+",
    ),
    (RedactionKind.API_KEY, rf"{_G}(?:{_KEY_PREFIXES})"),
    (
        RedactionKind.CREDENTIAL,
        rf"(?=[ACPRSTacprst])(?i:{_SECRET_WORDS})[\"']?(?:[ \t]{{0,8}}[:=]"
        rf"|(?:[ \t]{{1,8}}+(?i:{_LINKS})(?![A-Za-z])){{1,4}}+[ \t]{{0,8}}+[:=-]?)"
        rf"[ \t]{{0,8}}{_VALUE}",
    ),
    # "api token 3f9a…": a secret's name, a space, and a long token holding a digit.
    (
        RedactionKind.CREDENTIAL,
        rf"(?=[ACPRSTacprst])(?i:{_SECRET_WORDS})[\"']?[ \t]{{1,8}}+"
        rf"(?=[A-Za-z0-9_+/=.-]{{0,255}}[0-9])(?!{_AWS_SECRET})[A-Za-z0-9_+/=.-]{{16,}}+",
    ),
    # "my PIN is 4821", "PIN: 4821", "pin code 004821".
    (
        RedactionKind.CREDENTIAL,
        r"(?<![A-Za-z0-9_])(?=[Pp])(?i:pin)(?:[ _-]?(?i:code|number|no\.?))?[\"']?"
        rf"(?:[ \t]{{0,8}}[:=#]|[ \t]{{1,8}}+(?:(?i:{_LINKS})(?![A-Za-z])[ \t]{{1,8}}+){{0,4}}+)"
        r"[ \t]{0,8}+[0-9]{4,12}+(?![0-9])",
    ),
    (
        RedactionKind.ENV,
        r"(?<![A-Za-z0-9_])(?:export[ \t]{1,8}+[A-Za-z_][A-Za-z0-9_]{0,63}+"
        r"|[A-Z][A-Z0-9]{0,31}+(?:_[A-Z0-9]{1,31}+){1,7}+)"
        rf"[ \t]{{0,4}}=[ \t]{{0,4}}{_VALUE}",
    ),
    # A quoted path keeps its spaces, file name included.
    (RedactionKind.PATH, rf"(?<=[\"'`]){_PATH_START}[^\"'`\n]{{0,1024}}+(?=[\"'`])"),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9])[A-Za-z]:{_SEP}{_PATH_TAIL}"),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9\\])\\\\[^\s\\/\"'<>|]{{1,255}}+\\{_PATH_TAIL}"),
    (RedactionKind.PATH, rf"{_NOT_IN_PATH}~[A-Za-z0-9_.-]{{0,32}}+{_SEP}{_PATH_TAIL}"),
    (RedactionKind.PATH, rf"(?<![A-Za-z0-9_$%\\]){_ENV_DIR}{_PATH_TAIL}"),
    (
        RedactionKind.PATH,
        rf"{_NOT_IN_PATH}/[^\s\"'`<>|,;/]{{1,255}}+(?:[ ]{_WORD}){{0,7}}/{_PATH_TAIL}",
    ),
    # Home directories named without a leading separator ("Users/alice/Documents"), and root's.
    (
        RedactionKind.PATH,
        rf"(?<![\w./\\~-])(?=[HUhu])(?:home|Users|users){_SEP}{_SEG}{_SEP}{_PATH_TAIL}",
    ),
    (RedactionKind.PATH, rf"{_NOT_IN_PATH}/root(?![^\s\"'`<>|,;:.)\]!?])"),
    (RedactionKind.EMAIL, rf"{_MAIL_LOCAL}@{_MAIL_LABEL}(?:[.\u3002]{_MAIL_LABEL})++"),
    (
        RedactionKind.IP_ADDRESS,
        rf"(?<![A-Za-z0-9.]){_OCTET}(?:\.{_OCTET}){{3}}(?![0-9])(?!\.[0-9])",
    ),
    (
        RedactionKind.IP_ADDRESS,
        rf"(?<![A-Za-z0-9:.])(?:{_IPV6})(?:%[A-Za-z0-9_.-]{{1,16}}+)?(?![A-Za-z0-9:]|\.[0-9])",
    ),
    (RedactionKind.PRIVATE_KEY, _B64_BODY),
    (RedactionKind.API_KEY, _AWS_SECRET),
)

# Only top-level named groups, so `Match.lastgroup` names the alternative that matched.
SECRETS = re.compile("|".join(f"(?P<k{i}>{pattern})" for i, (_, pattern) in enumerate(_PATTERNS)))
KIND_BY_GROUP = {f"k{i}": kind for i, (kind, _) in enumerate(_PATTERNS)}
