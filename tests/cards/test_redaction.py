"""Redaction by class: hidden separators, glued keys, compatibility forms and the newer shapes.

The older shape-by-shape checks live in test_remote.py; these check what issue 9 item 4 found
leaking, as classes, through `redact` and through the remote-card projection.
"""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import HIDDEN_SEPARATORS, build_card, secrets_in_text

from cards.redaction import RedactionKind, placeholder, redact, remove_placeholders
from cards.remote import RemoteCard, project_card

FP = "cd" * 32
TITLE_CHARS, TAG_CHARS, COLUMN_CHARS, LABEL_CHARS = 200, 80, 128, 200


def folded(text: str) -> str:
    return unicodedata.normalize("NFKC", remove_placeholders(text))


def leaked(cores: tuple[str, ...], output: str, benign: str) -> list[str]:
    """Each 8-character window of a core (a shorter core whole) found in `output`.

    A window the same text without the secret also produces is not a leak.
    """
    out, ok = folded(output), folded(benign)
    found = []
    for core in cores:
        size = min(8, len(core))
        for i in range(len(core) - size + 1):
            window = core[i : i + size]
            if window in out and window not in ok:
                found.append(window)
    return found


# --- the property ----------------------------------------------------------------------------


@given(secrets_in_text())
def test_no_window_of_a_disguised_secret_survives_redaction(case):
    name, before, secret, after, cores = case
    for single_line in (False, True):
        result = redact(before + secret + after, single_line=single_line)
        benign = redact(before + " " + after, single_line=single_line)
        assert not leaked(cores, result.text, benign.text), (name, result.text)
        assert result.redactions >= 1
        assert redact(result.text, single_line=single_line).text == result.text


def card_fields(before: str, secret: str, after: str) -> dict[str, object]:
    """Card metadata with the secret in every free-text field that can hold it."""
    multi = before + secret + after
    line = " ".join(multi.split())
    fallback = " ".join((before + " " + after).split())

    def fit(limit: int) -> str:
        return line if len(line) <= limit else fallback

    return {
        "title": fit(TITLE_CHARS),
        "summary": multi,
        "query_fingerprint": FP,
        "source": fit(LABEL_CHARS),
        "source_version": fit(LABEL_CHARS),
        "tags": [fit(TAG_CHARS), "cohort"],
        "columns": ["response", fit(COLUMN_CHARS)],
    }


def everything_sent(remote: RemoteCard) -> str:
    values = "\n".join(str(v) for v in remote.metadata.values())
    return f"{remote.content}\n{values}\n{remote.model_dump_json()}"


@given(secrets_in_text())
def test_no_window_of_a_disguised_secret_reaches_the_remote_card(case):
    name, before, secret, after, cores = case
    remote = project_card(build_card(card_fields(before, secret, after)))
    benign = project_card(build_card(card_fields(before, "", after)))
    assert isinstance(remote, RemoteCard) and isinstance(benign, RemoteCard)
    assert not leaked(cores, everything_sent(remote), everything_sent(benign)), name
    assert redact(remote.content).redactions == 0


# --- the classes, one example each -----------------------------------------------------------

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX3NlY3JldA"
PEM_BODY = (
    "MIIEpAIBAAKCAQEA7b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAA\n"
    "AAtzc2gtZWQyNTUxOQAAACD0qwertyuiopasdfghjklzxcvbnmQWERTYUIOPASDF\n"
    "Q2FyZQab"
)
FULLWIDTH_KEY = "".join(chr(ord(c) + 0xFEE0) for c in "sk-live-4f9a8b7c6d5e4f3a2b1c")

CLASSES = [
    ("use key_AKIAIOSFODNN7EXAMPLE now", RedactionKind.API_KEY, ["IOSFODNN7"]),
    (f"tok_{GHP} x", RedactionKind.API_KEY, ["a1B2c3D4"]),
    (f"t_{JWT} x", RedactionKind.JWT, ["eyJhbGci", "c2lnbmF0"]),
    (f"aws-{AWS_SECRET}-x", RedactionKind.API_KEY, ["wJalrXUtn", "EXAMPLEKEY"]),
    (f"secret {AWS_SECRET} here", RedactionKind.API_KEY, ["wJalrXUtn"]),
    ("sk-\ufe0flive-4f9a8b7c\u034f6d5e4f3a2b1c", RedactionKind.API_KEY, ["4f9a8b7c"]),
    ("AKIA\u180bIOSF\u3164ODNN7\u2800EXAMPLE", RedactionKind.API_KEY, ["IOSF", "EXAMPLE"]),
    ("AKIA\U000e0100IOSFODNN7\u115fEXAMPLE\u1160", RedactionKind.API_KEY, ["IOSF", "EXAMPLE"]),
    (FULLWIDTH_KEY, RedactionKind.API_KEY, ["4f9a", "４ｆ９ａ"]),
    ("\U0001d400\U0001d40a\U0001d408\U0001d400IOSFODNN7EXAMPLE", RedactionKind.API_KEY, ["IOSF"]),
    (
        "https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2026"
        "&X-Amz-Signature=0f1e2d3c4b5a69788796a5b4c3d2e1f0 end",
        RedactionKind.URL_SECRET,
        ["IOSFODNN7", "0f1e2d3c"],
    ),
    ("gs?X-Goog-Signature=9a8b7c6d5e4f3a2b1c&x=1", RedactionKind.URL_SECRET, ["9a8b7c6d"]),
    ("X-Amz-Signature=9a8b7c6d5e4f3a2b1c", RedactionKind.URL_SECRET, ["9a8b7c6d"]),
    ("https://a.blob.example/c?sv=2022&sig=Zx9Yw8%2Bv7", RedactionKind.URL_SECRET, ["Zx9Y"]),
    ("https://maps.example/api?key=AbCdEf123456&q=x", RedactionKind.URL_SECRET, ["AbCdEf12"]),
    ("/x?access_token=zz99&api_key=qq88&password=pp77", RedactionKind.URL_SECRET, ["zz99", "pp77"]),
    ("key:\n" + PEM_BODY + "\nend", RedactionKind.PRIVATE_KEY, ["MIIEpAIB", "qwerty", "Q2FyZQab"]),
    ("the password is hunter2!", RedactionKind.CREDENTIAL, ["hunter2"]),
    ("my token was abc123xyz.", RedactionKind.CREDENTIAL, ["abc123xyz"]),
    ("The API key is now 'x y z' ok", RedactionKind.CREDENTIAL, ["x y z"]),
    ("ｐａｓｓｗｏｒｄ：ｈｕｎｔｅｒ２ next", RedactionKind.CREDENTIAL, ["ｈｕｎｔ", "hunt"]),
    ("$HOME/projects/q3.csv", RedactionKind.PATH, ["projects"]),
    ("${XDG_CONFIG_HOME}/app/x", RedactionKind.PATH, ["app/x"]),
    ("%USERPROFILE%\\Documents\\x.docx", RedactionKind.PATH, ["Documents"]),
    ("$env:USERPROFILE\\x.txt", RedactionKind.PATH, ["x.txt"]),
    ("C:\\Users\\Alice Smith\\My Documents\\plan.xlsx", RedactionKind.PATH, ["Alice", "Smith"]),
    ("/Users/Alice Smith/Q3 Plan/report.csv now", RedactionKind.PATH, ["Smith", "Q3 Plan"]),
    ("'/home/alice/my file.txt'", RedactionKind.PATH, ["alice", "my file"]),
    ("host 10.0.0.12 and 192.168.1.1.", RedactionKind.IP_ADDRESS, ["10.0.0.12", "192.168"]),
    ("ip 2001:db8:85a3::8a2e:370:7334 x", RedactionKind.IP_ADDRESS, ["2001:db8", "7334"]),
    ("fe80::1ff:fe23:4567:890a%eth0", RedactionKind.IP_ADDRESS, ["fe80", "eth0"]),
    ("[2001:0db8:0000:0000:0000:ff00:0042:8329]:443", RedactionKind.IP_ADDRESS, ["0db8", "8329"]),
    ("postgres://u:pa#ss@host/db", RedactionKind.CONNECTION_STRING, ["pa#ss", "host"]),
    ("https://admin:s3#c?r/t@internal.example/x", RedactionKind.CONNECTION_STRING, ["s3#c"]),
    # issue 30: addresses in any script, webhooks, named tokens, PINs, home directories
    ("write to jürgen.müller@exämple.de today", RedactionKind.EMAIL, ["jürgen", "müller"]),
    ("josé@correo.es.", RedactionKind.EMAIL, ["josé", "correo"]),
    ("联系张伟@例子.公司，谢谢", RedactionKind.EMAIL, ["张伟", "例子"]),
    ("राम@उदाहरण.भारत", RedactionKind.EMAIL, ["राम", "उदाहरण"]),
    ("ＪＯＳＥ＠ｃｏｒｒｅｏ．ｅｓ", RedactionKind.EMAIL, ["ｃｏｒｒｅｏ", "correo"]),
    (
        "hook https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2 end",
        RedactionKind.URL_SECRET,
        ["T0ABCDEF1", "Xy9Zw8Vu"],
    ),
    ("hooks.slack.com/workflows/T01/A02/xyz987 x", RedactionKind.URL_SECRET, ["xyz987"]),
    (
        "discord.com/api/webhooks/123456789/AbCdEfGh-ij_klm x",
        RedactionKind.URL_SECRET,
        ["AbCdEfGh"],
    ),
    ("api token " + "3f9a" * 16 + " please", RedactionKind.CREDENTIAL, ["3f9a3f9a"]),
    ("the access token c2VjcmV0LXRva2VuLTE5ODc= end", RedactionKind.CREDENTIAL, ["c2VjcmV0"]),
    ("my PIN is 4821.", RedactionKind.CREDENTIAL, ["4821"]),
    ("PIN: 004821 and", RedactionKind.CREDENTIAL, ["004821"]),
    ("pin code 7391", RedactionKind.CREDENTIAL, ["7391"]),
    ("bank pin 55120 x", RedactionKind.CREDENTIAL, ["55120"]),
    ("in home/alice/data/q3.csv", RedactionKind.PATH, ["alice"]),
    ("Users/jürgen/Documents/plan.xlsx", RedactionKind.PATH, ["jürgen"]),
    ("as /root.", RedactionKind.PATH, ["/root"]),
]


@pytest.mark.parametrize(("text", "kind", "fragments"), CLASSES)
def test_each_class_is_replaced_by_its_placeholder(text, kind, fragments):
    result = redact(text)
    assert placeholder(kind) in result.text, result.text
    for fragment in fragments:
        assert fragment not in result.text
        assert fragment not in unicodedata.normalize("NFKC", result.text)
    assert redact(result.text).text == result.text


@pytest.mark.parametrize(
    "text",
    [
        "v1.2.3.4 and release 2.10.1",
        "std::vector and Foo::bar",
        "at 10:30:45 on port 00:1a:2b:3c:4d:5e",
        "https://host:8080/path and https://example.org/docs#x@y",
        "the token count was 512 and tokens were cached",
        "digest " + "0123456789abcdef" * 4 + "\nand " + "fedcba9876543210" * 4,
        "½ cup, ﬁle, ＡＢＣ prose, 𝐛𝐨𝐥𝐝, Café ✓ 数据 …",
        "TreatmentResponseByCohort over 12 weeks",
        # issue 30: ordinary scientific text near the new shapes
        "the PIN1 isomerase binds at pin 3; PIN diode gain 4000 at 5 GHz",
        "token ring topology and tokenised text, 2048 tokens per window",
        "home/away ratio 1.2; the user study had 48 users/day",
        "IC50 of 3.2 µM; root mean square 0.04; square root of 2",
        "Müller et al. (2019) and José's cohort; 张伟 reported 例子",
        "the pinned version 1.4.2 and the sha256 " + "ab" * 32,
    ],
)
def test_look_alikes_pass_through_in_their_own_form(text):
    result = redact(text)
    assert result.text == unicodedata.normalize("NFC", text)
    assert result.redactions == 0


def test_paths_with_spaces_keep_the_prose_after_them():
    result = redact("see /tmp/a b/c.csv and /tmp/d.csv then C:\\x y\\z.txt done")
    assert result.text == "see [redacted:path] and [redacted:path] then [redacted:path] done"


def test_two_matches_sharing_one_folded_character_both_go():
    # "¼" folds to "1⁄4": an address ends in its "1", an e-mail address starts at its "4".
    result = redact("at 10.0.0.¼@ex.co now")
    assert result.text == "at [redacted:ip_address][redacted:email] now"
    assert result.redactions == 2
    assert redact(result.text).text == result.text


def test_every_format_character_and_default_ignorable_is_removed():
    formats = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    hidden = "".join(formats) + "".join(HIDDEN_SEPARATORS)
    ignorable = "".join(map(chr, [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]))
    assert redact(f"a{hidden}b{ignorable}c").text == "abc"


ADVERSARIAL = [
    "eyJ_" * 12_500,
    "x_eyJa.eyJ" * 5_000,
    "_sk-" * 12_500,
    "_AKIA" * 10_000,
    "?key=" * 10_000,
    "&key=&" * 8_000,
    "X-Amz-Signature=" * 3_000,
    "Ab1+" * 12_500,
    ("Ab1/" * 10 + " ") * 1_200,
    ("Ab1/" * 16 + "\n") * 750,
    ("Ab1/" * 12 + " x ") * 1_000,
    ("Ab1/" * 10 + "A.") * 1_200,
    "password is " * 4_000,
    "password is is is is " * 2_400,
    "$a/" * 16_000,
    "%A%\\" * 12_500,
    "${" * 25_000,
    "/a a a a a a a a a " * 2_600,
    "/x/" + "a a a a a a a a " * 3_000,
    "C:\\a a a a a a a a a " * 2_400,
    "'/a" * 16_000,
    "'/" + "a" * 50_000,
    "https://u:" * 5_000,
    "https://u:" + "a" * 50_000,
    "a://u:p/" * 6_000,
    "1.1.1." * 8_000,
    "1:" * 25_000,
    "a::" * 16_000,
    "fe80::" * 8_000,
    "1:2:3:4:5:6:7:8:9 " * 2_700,
    "\uff45\uff59\uff2a" * 16_000,
    "\ufdfa" * 50_000,
    "½" * 50_000,
    "a\u200b\ufe0f" * 16_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:12]))
def test_hostile_inputs_for_the_new_classes_complete(text):
    result = redact(text, max_chars=200_000)
    assert redact(result.text, max_chars=400_000).text == result.text


HOSTILE = [
    "key_", "tok-", "_", "-", "AKIA", "eyJ", ".eyJ", "ghp_", "sk-", "?", "&", "key=", "sig=",
    "X-Amz-Signature=", "password is ", "the token was ", "$HOME/", "%USERPROFILE%\\", "~/",
    "C:\\", "/Users/", "a b/", " ", "\n", "'", "10.0.0.1", "1.", "fe80::", "::", ":", "#", "@",
    "https://u:", "Ab1+Cd2/" * 5, "Ab1+Cd2/" * 8, "=", "\ufe0f", "\u034f", "\u3164", "\u2800",
    "\U000e0100", "\uff21", "\uff0f", "½", "\U0001d400", "[redacted:", "[redacted:ip_address]",
]  # fmt: skip
hostile_text = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=3), max_size=30).map("".join)


@given(hostile_text)
def test_redaction_of_new_shapes_is_a_fixed_point(text):
    for single_line in (False, True):
        result = redact(text, single_line=single_line)
        again = redact(result.text, single_line=single_line)
        assert again.text == result.text
        assert again.redactions == 0
        assert unicodedata.is_normalized("NFC", result.text)


ISSUE_30_SECRETS = [
    ("jürgen.müller@exämple.de", ["jürgen.m", "exämple"]),
    ("josé@correo.es", ["josé@cor", "correo.e"]),
    ("张伟@例子.公司", ["张伟", "例子.公司"]),
    ("https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2",
     ["T0ABCDEF", "Xy9Zw8Vu"]),
    ("api token " + "3f9a" * 16, ["3f9a3f9a"]),
    ("my PIN is 4821", ["4821"]),
    ("/home/jürgen/projects/q3", ["jürgen"]),
]  # fmt: skip


@pytest.mark.parametrize(("secret", "cores"), ISSUE_30_SECRETS)
def test_the_issue_30_shapes_never_reach_the_remote_card(secret, cores):
    before, after = "Cohort response, contact ", " for the dose table."
    remote = project_card(build_card(card_fields(before, secret, after)))
    benign = project_card(build_card(card_fields(before, "", after)))
    assert isinstance(remote, RemoteCard) and isinstance(benign, RemoteCard)
    assert not leaked(tuple(cores), everything_sent(remote), everything_sent(benign))
