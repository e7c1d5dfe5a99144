"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import hashlib

from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)

# Display text: printable, no control characters, never blank.
_printable = st.characters(blacklist_categories=("Cc", "Cs"))
lines = st.text(_printable, min_size=1, max_size=60).filter(lambda s: s.strip() != "")
fingerprints = st.binary(min_size=1, max_size=16).map(lambda b: hashlib.sha256(b).hexdigest())

metadata_fields = st.fixed_dictionaries(
    {
        "title": lines,
        "summary": lines,
        "query_fingerprint": fingerprints,
        "source": lines,
        "source_version": lines,
    },
    optional={
        "tags": st.lists(lines, max_size=5),
        "columns": st.lists(lines, max_size=5),
        "shape": st.lists(st.integers(min_value=0, max_value=10**9), max_size=3),
        "media_type": st.sampled_from(
            ["application/octet-stream", "application/vnd.apache.parquet", "text/csv"]
        ),
    },
)


def build_card(fields: dict[str, object], content: bytes = b"x", project: str = "p1"):
    """A valid ExperimentCardV1 from metadata fields, for tests of the pure core."""
    from datetime import UTC, datetime

    from cards import ProjectId, parse_metadata
    from cards.testing import card_for_bytes

    return card_for_bytes(
        content,
        parse_metadata(fields),
        project_id=ProjectId(project),
        session_id="s1",
        now=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
    )


# --- Synthetic secrets for the redaction properties --------------------------------------------
# Every value is drawn here from fixed alphabets in the shape of a real credential; none is real.
# A case is (name, text, cores, glue): the secret as it appears in text, the parts of it that must
# not survive redaction, and whether `_` or `-` may join it to a neighbouring word.

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_ALNUM = _UPPER + _LOWER + _DIGITS
_URL_SAFE = _ALNUM + "-_"
_BASE64 = _ALNUM + "+/"
_HEX = "0123456789abcdef"


def _drawn(alphabet: str, min_size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    size = min_size if max_size is None else max_size
    return st.text(alphabet, min_size=min_size, max_size=size)


def _case(name: str, text: str, cores: tuple[str, ...] | None = None, glue: bool = False):
    return (name, text, cores if cores is not None else (text,), glue)


@st.composite
def _key_prefix_secrets(draw):
    prefix, alphabet, size = draw(
        st.sampled_from(
            [
                ("AKIA", _UPPER + _DIGITS, 16),
                ("ASIA", _UPPER + _DIGITS, 16),
                ("ghp_", _ALNUM, 36),
                ("gho_", _ALNUM, 36),
                ("ghs_", _ALNUM, 36),
                ("github_pat_", _ALNUM + "_", 82),
                ("xoxb-", _DIGITS + "-", 24),
                ("xoxp-", _ALNUM + "-", 40),
                ("sk-", _ALNUM, 48),
                ("sk-proj-", _URL_SAFE, 40),
                ("sk-ant-api03-", _URL_SAFE, 60),
                ("sk_live_", _ALNUM, 24),
                ("rk_test_", _ALNUM, 24),
                ("AIza", _URL_SAFE, 35),
                ("hf_", _ALNUM, 34),
                ("npm_", _ALNUM, 36),
                ("glpat-", _URL_SAFE, 20),
            ]
        )
    )
    body = draw(_drawn(alphabet, size))
    return _case(f"key:{prefix}", prefix + body, glue=True)


@st.composite
def _jwt_secrets(draw):
    import base64

    def b64url(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    subject = draw(_drawn(_ALNUM, 4, 24))
    header = b64url(b'{"alg":"HS256","typ":"JWT"}')
    payload = b64url(b'{"sub":"' + subject.encode() + b'"}')
    signature = draw(_drawn(_URL_SAFE, 16, 43))
    return _case("jwt", f"{header}.{payload}.{signature}", glue=True)


@st.composite
def _aws_secret_keys(draw):
    # Forty base64 characters with every class present, as real secret access keys have.
    chars = list(draw(_drawn(_BASE64, 37)))
    for forced in (draw(st.sampled_from(_UPPER)), draw(st.sampled_from(_LOWER)), "7"):
        chars.insert(draw(st.integers(0, len(chars))), forced)
    return _case("aws_secret", "".join(chars), glue=True)


@st.composite
def _pem_bodies(draw):
    import base64

    # An RSA key's DER prefix, then random bytes: the body a PEM file holds between its headers.
    der = b"\x30\x82\x04\xa4\x02\x01\x00\x02\x82\x01\x01\x00"
    encoded = base64.b64encode(der + draw(st.binary(min_size=60, max_size=200))).decode()
    lines = tuple(encoded[i : i + 64] for i in range(0, len(encoded), 64))
    return _case("pem_body", "\n".join(lines), lines)


@st.composite
def _url_secrets(draw):
    value = draw(_drawn(_URL_SAFE, 12, 40))
    host = draw(_drawn(_LOWER, 3, 10))
    kind = draw(st.sampled_from(["s3", "gcs", "azure", "param"]))
    if kind == "s3":
        key_id = "AKIA" + draw(_drawn(_UPPER + _DIGITS, 16))
        signature = draw(_drawn(_HEX, 64))
        text = (
            f"https://{host}.s3.amazonaws.com/obj.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential={key_id}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
            f"&X-Amz-Expires=900&X-Amz-Signature={signature}"
        )
        return _case("url:s3", text, (key_id, signature))
    if kind == "gcs":
        signature = draw(_drawn(_HEX, 64))
        text = f"https://storage.googleapis.com/{host}/o?X-Goog-Signature={signature}&x=1"
        return _case("url:gcs", text, (signature,))
    if kind == "azure":
        text = f"https://{host}.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig={value}%3D"
        return _case("url:azure", text, (value,))
    param = draw(
        st.sampled_from(["key", "token", "access_token", "api_key", "secret", "password", "sig"])
    )
    return _case(f"url:{param}", f"https://{host}.example/v1?{param}={value}&page=2", (value,))


@st.composite
def _phrased_secrets(draw):
    value = draw(_drawn(_ALNUM + "!#$%^&*()+.", 8, 24))
    lead = draw(st.sampled_from(["the", "my", "our", "and"]))
    name = draw(st.sampled_from(["password", "token", "secret", "passphrase", "API key"]))
    link = draw(st.sampled_from(["is", "was", "is now", "was set to", "is:", ":", "="]))
    return _case("phrase", f"{lead} {name} {link} {value}", (value,))


@st.composite
def _env_secrets(draw):
    name = draw(st.sampled_from(["HONCHO_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"]))
    value = draw(_drawn(_ALNUM + "-_.", 8, 32))
    return _case("env", f"{name}={value}", (value,))


@st.composite
def _connection_strings(draw):
    scheme = draw(st.sampled_from(["postgres", "mysql", "redis", "https", "amqp", "myapp+tls"]))
    user = draw(_drawn(_LOWER, 3, 8))
    password = draw(_drawn(_ALNUM, 3, 12)) + "#" + draw(_drawn(_ALNUM + "#?/!$", 3, 12))
    host = draw(_drawn(_LOWER, 3, 10)) + ".internal"
    return _case("connection", f"{scheme}://{user}:{password}@{host}/db")


_path_words = st.lists(_drawn(_LOWER, 1, 10), min_size=1, max_size=3).map(" ".join)
_file_names = _drawn(_LOWER + _DIGITS, 1, 12).map(lambda name: name + ".csv")


@st.composite
def _paths(draw):
    user = draw(_drawn(_UPPER, 1)) + draw(_drawn(_LOWER, 2, 8))
    full_name = user + " " + draw(_drawn(_UPPER, 1)) + draw(_drawn(_LOWER, 2, 8))
    folder, file = draw(_path_words), draw(_file_names)
    text = draw(
        st.sampled_from(
            [
                f"/home/{user.lower()}/{folder}/{file}",
                f"/Users/{full_name}/{folder}/{file}",
                f"~/{folder}/{file}",
                f"$HOME/{folder}/{file}",
                f"${{HOME}}/{folder}/{file}",
                f"%USERPROFILE%\\{folder}\\{file}",
                f"C:\\Users\\{full_name}\\{folder}\\{file}",
                f"\\\\{user.lower()}-pc\\share\\{folder}\\{file}",
            ]
        )
    )
    return _case("path", text)


@st.composite
def _ip_addresses(draw):
    import ipaddress

    if draw(st.booleans()):
        octets = draw(st.lists(st.integers(0, 255), min_size=4, max_size=4))
        return _case("ipv4", ".".join(map(str, octets)))
    groups = draw(st.lists(st.integers(1, 0xFFFF), min_size=8, max_size=8))
    start, length = draw(st.integers(1, 5)), draw(st.integers(0, 2))
    groups[start : start + length] = [0] * length
    raw = b"".join(group.to_bytes(2, "big") for group in groups)
    address = ipaddress.IPv6Address(raw)
    return _case("ipv6", address.exploded if draw(st.booleans()) else address.compressed)


synthetic_secrets = st.one_of(
    _key_prefix_secrets(),
    _jwt_secrets(),
    _aws_secret_keys(),
    _pem_bodies(),
    _url_secrets(),
    _phrased_secrets(),
    _env_secrets(),
    _connection_strings(),
    _paths(),
    _ip_addresses(),
)

# Characters that render as nothing: redaction must see through each of them.
HIDDEN_SEPARATORS = (
    "\u00ad \u034f \u061c \u115f \u1160 \u17b4 \u180b \u180c \u180d \u180e \u180f \u200b \u200c"
    " \u200d \u200e \u202e \u2060 \u2064 \u2066 \u2800 \u3164 \ufe00 \ufe0f \ufeff \uffa0"
    " \U0001d173 \U000e0001 \U000e0041 \U000e0100 \U000e01ef"
).split(" ")
_hidden = st.sampled_from(HIDDEN_SEPARATORS) | st.characters(categories=["Cf"])


def _compatibility_form(char: str, style: int) -> str:
    """`char` as a fullwidth (style 0) or mathematical bold (style 1) form that NFKC folds back."""
    code = ord(char)
    if style == 0 and 0x21 <= code <= 0x7E:
        return chr(code + 0xFEE0)
    if style == 1 and char in _UPPER:
        return chr(0x1D400 + code - ord("A"))
    if style == 1 and char in _LOWER:
        return chr(0x1D41A + code - ord("a"))
    if style == 1 and char in _DIGITS:
        return chr(0x1D7CE + code - ord("0"))
    return char


@st.composite
def disguised(draw, case):
    """`case`'s text with compatibility forms, hidden separators and `_`/`-` glue drawn in."""
    name, text, cores, glue = case
    chars = list(text)
    style = draw(st.integers(0, 1))
    for index in draw(st.sets(st.integers(0, len(chars) - 1), max_size=len(chars))):
        chars[index] = _compatibility_form(chars[index], style)
    for _ in range(draw(st.integers(0, 4))):
        chars.insert(draw(st.integers(0, len(chars))), draw(_hidden))
    text = "".join(chars)
    if glue and draw(st.booleans()):
        word = draw(st.sampled_from(["key", "tok", "t", "x", "aws"]))
        text = word + draw(st.sampled_from("_-")) + text + draw(st.sampled_from("_-")) + word
    return name, text, cores


_prose = st.lists(
    st.sampled_from(["cohort", "result", "table", "see", "note", "run", "with", "from", "and"]),
    min_size=1,
    max_size=4,
).map(" ".join)


@st.composite
def secrets_in_text(draw):
    """(name, before, secret text, after, cores): a disguised synthetic secret inside prose."""
    name, text, cores = draw(synthetic_secrets.flatmap(disguised))
    before = draw(_prose) + draw(st.sampled_from([" ", "\n", "\t", " (", ": "]))
    after = draw(st.sampled_from([" ", "\n", "\t", ") ", ", "])) + draw(_prose)
    return name, before, text, after, cores
