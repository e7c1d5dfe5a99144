"""Whether a memory note is the person's own plain statement in their latest message (pure).

`memory_record` and `memory_correct` keep only content that is whole clauses of the person's
latest message (a clause ends at `. ! ? ; :` or a line break), so a model cannot record a
fragment that reverses what was said ("like X" out of "I do not like X"). Appearing there is not
enough: the person must also have asserted it. A clause is not consent when it is

- governed by a refusal to have it kept: "don't remember / never store / do not keep / forget /
  off the record / between us ..." anywhere before it in the message (a refusal holds until the
  message ends), or in the next sentence when that one points back ("my PIN is 4821. Don't keep
  that."), or inside the content itself;
- a question (the clause ends with `?`);
- quoted or reported speech: inside quotation marks, on a `>` quote line, or introduced by
  someone else's speech verb ("Bob said: ...", "according to Bob: ...", for the rest of the line,
  or the lines a `...:` line introduces);
- denied or not asserted: introduced by a denial or a hypothetical ("Not true: ...", "Just
  kidding: ...", "Hypothetically: ..."), or followed by a sentence that only denies it ("I like
  tabs. Not true.").

Refusing is the safe side: a refused note costs the model a retry with the person's own words,
a wrongly kept one cannot be taken back (there is no forget tool). The same text said once
plainly elsewhere in the message is consent.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator

from cards.redaction import normalise_text


class Refusal(enum.StrEnum):
    """Why content is not the person's consent (a content-free counter suffix)."""

    UNGROUNDED = "ungrounded"  # not whole clauses of the person's latest message
    WITHHELD = "withheld"  # the person asked not to keep it
    QUESTION = "question"
    REPORTED = "reported"  # quoted or someone else's words
    DENIED = "denied"  # denied, a joke or a hypothetical


def consent(content: str, latest: str) -> Refusal | None:
    """None when `content` is a plain statement of the person in `latest`; else why not."""
    needle = _SPACES.sub(" ", _fold(content)).strip(" " + _ENDS)
    text = " " + _SPACES.sub(" ", _fold(latest)) + " "
    if not needle:
        return Refusal.UNGROUNDED
    first: Refusal | None = Refusal.UNGROUNDED
    for start, end in _clause_matches(text, needle):
        why = _why_not(text, start, end)
        if why is None:
            return None
        if first is Refusal.UNGROUNDED:
            first = why
    return first


def withholds(message: str) -> bool:
    """Whether the person asks, anywhere in `message`, not to have something kept."""
    text = " " + _SPACES.sub(" ", _fold(message)) + " "
    return next(_refusals(text), None) is not None


def kept_clauses(message: str) -> str:
    """`message` without the clauses the person withheld (and the refusals themselves).

    Clauses end at `. ! ? ; :` or a line break, the same in the message and in its folded form,
    so the folded text decides and the person's own text is kept.
    """
    folded = " " + _SPACES.sub(" ", _fold(message)) + " "
    spans = [m.span() for m in re.finditer(r"[^.!?;:\n]+", folded)]
    pieces = re.split(r"([.!?;:\n])", normalise_text(message))
    kept: list[str] = []
    for index in range(0, len(pieces), 2):
        clause, end = pieces[index], pieces[index + 1] if index + 1 < len(pieces) else ""
        if not clause.strip(" \t"):
            kept.append(end if end == "\n" else "")
            continue
        span = spans.pop(0) if spans else (0, 0)
        if not _withheld(folded, *span):
            kept.append(clause + end)
    return "".join(kept).strip()


_ENDS = ".!?;:\n"
_OPENERS = ' -*\u2022>"\u201c\u201e\u00ab\u2039\u300c\u300e\uff02('  # bullets, quotes
_CLOSERS = ' "\u201d\u00bb\u203a\u300d\u300f\uff02)'
_SPACES = re.compile(r"[ \t]+")
# One character for one: positions in the folded text stay those of the folded text.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})


def _fold(text: str) -> str:
    return normalise_text(text).casefold().translate(_APOSTROPHES)


def _clause_matches(text: str, needle: str) -> Iterator[tuple[int, int]]:
    start = text.find(needle)
    while start != -1:
        before = text[:start].rstrip(_OPENERS)
        after = text[start + len(needle) :].lstrip(_CLOSERS)
        if (not before or before[-1] in _ENDS) and (not after or after[0] in _ENDS):
            yield start, start + len(needle)
        start = text.find(needle, start + 1)


def _why_not(text: str, start: int, end: int) -> Refusal | None:
    if _withheld(text, start, end):
        return Refusal.WITHHELD
    if "?" in text[start:end] or text[end:].lstrip(" ")[:1] == "?":
        return Refusal.QUESTION
    if _quoted(text, start, end) or _introduced(text, start, _SPEECH, own_words_allowed=True):
        return Refusal.REPORTED
    if _introduced(text, start, _DENIAL, own_words_allowed=False) or _denied_after(text, end):
        return Refusal.DENIED
    return None


# -- refusals -----------------------------------------------------------------------------------

_W = r"(?:[^\s.!?;:]+\s+)"  # one word of the same clause
_NEG = (
    r"(?:do\s*n[o']?t|dont|never|not|no\s+need\s+to|stop|must\s*n[o']?t|mustnt|should\s*n[o']?t"
    r"|shouldnt|wo\s*n'?t|will\s+not|would\s*n[o']?t|ca\s*n'?t|can\s*not|without|avoid|refrain"
    r"\s+from|rather\s+you\s+did\s*n[o']?t|rather\s+not|prefer\s+you\s+did\s*n[o']?t)"
)
_KEEP = (
    rf"(?:remember\w*|memori[sz]\w*|stor(?:e|es|ed|ing|age)|sav(?:e|es|ed|ing)|record\w*"
    rf"|retain\w*|keep\w*|kept|log|logs|logged|logging|note|notes|noted|noting|persist\w*"
    rf"|writ(?:e|es|ing|ten)\s+{_W}{{0,2}}?down|wrote\s+{_W}{{0,2}}?down|track\w*|captur\w*"
    rf"|archiv\w*|commit\w*\s+{_W}{{0,3}}?to\s+memory|jot\w*"
    rf"|add\w*\s+{_W}{{0,3}}?to\s+(?:your\s+|the\s+)?(?:memory|notes|records?))"
)
_STORE = r"(?:record|records|memory|notes?|logs?)"
_REFUSAL = re.compile(
    rf"\b{_NEG}\s+{_W}{{0,4}}?{_KEEP}\b"
    r"|\b(?:forget|unlearn)\b(?!\s+(?:to|it\s+wa|about\s+it\s+wa|which|where|how|why|whether))"
    rf"|\bnot\s+for\s+(?:the\s+|your\s+|any\s+|my\s+)?(?:{_STORE}|remembering|storing|saving)\b"
    r"|\bnot\s+to\s+be\s+(?:\S+\s+)?(?:remembered|stored|saved|recorded|kept|noted|logged"
    r"|memori[sz]ed)\b"
    r"|\boff\s+(?:the\s+)?record\b|\boff-the-record\b|\bbetween\s+(?:us|you\s+and\s+me)\b"
    r"|\bin\s+confidence\b|\bconfidential(?:ly)?\b|\bprivate(?:ly)?\s*[:,]"
    rf"|\bkeep\s+{_W}{{0,3}}?(?:out\s+of|away\s+from)\s+{_W}{{0,2}}?{_STORE}\b"
    rf"|\b(?:erase|delete|drop|purge|remove)\s+{_W}{{0,4}}?from\s+(?:your\s+|the\s+)?memory\b"
)
# A subject before the negation describes a habit ("we never store raw data", "I always forget
# my keys"), not a request about this message; "I don't want you to keep it" still is one.
_HABIT = re.compile(r"\b(?:i|we|they|he|she|it|people)\s+(?:\S+\s+)?$")
_WANT = re.compile(r"\b(?:want|wish|like|need|rather|prefer|ask|allow)\b")
_NOT_FORGETTING = re.compile(rf"\bforget\b|\b{_NEG}\s+$")
_LEAD_IN = re.compile(r"\b(?:please|and|but|so|just|oh|ok|okay|also|then|actually|yes|no)\b,?")
_BACK = re.compile(
    r"\b(?:that|it|this|those|these|them|the\s+above|what\s+i\s+(?:just\s+)?(?:said|wrote|told))\b"
)


def _refusals(text: str) -> Iterator[re.Match[str]]:
    for found in _REFUSAL.finditer(text):
        phrase = found.group(0)
        clause_start = max(text.rfind(c, 0, found.start()) for c in _ENDS) + 1
        lead = text[clause_start : found.start()]
        habitual = _HABIT.search(lead) and not _WANT.search(lead + phrase)
        if habitual and (re.match(_NEG, phrase) or phrase.startswith(("forget", "unlearn"))):
            continue
        if phrase.startswith(("forget", "unlearn")):
            if _NOT_FORGETTING.search(lead):
                continue  # "don't forget": the opposite of a refusal
        elif "forget" in phrase:
            continue  # "don't forget to save this"
        yield found


def _withheld(text: str, start: int, end: int) -> bool:
    for found in _refusals(text):
        if found.start() < end:
            return True  # before the clause (it holds to the end) or inside it
        between = text[end : found.start()]
        if (
            sum(between.count(c) for c in ".!?\n") <= 1
            and _opens_its_sentence(text, found)
            and _BACK.search(_sentence_at(text, found))
        ):
            return True  # "my PIN is 4821. Don't keep that."
    return False


def _opens_its_sentence(text: str, found: re.Match[str]) -> bool:
    """Whether a refusal starts its sentence: else its "it" names what that sentence said first.

    ("My key is X, keep it out of any notes." withholds the key, not the sentence before.)
    """
    begin = max(text.rfind(c, 0, found.start()) for c in ".!?\n") + 1
    lead = _LEAD_IN.sub("", text[begin : found.start()]).strip(" " + _OPENERS)
    return not lead


def _sentence_at(text: str, found: re.Match[str]) -> str:
    stops = ".!?\n"
    begin = max(text.rfind(c, 0, found.start()) for c in stops) + 1
    ends = [i for i in (text.find(c, found.end()) for c in stops) if i != -1]
    return text[begin : min(ends, default=len(text))]


# -- quotation and reported speech ---------------------------------------------------------------

_QUOTES = {'"': '"', "\u201c": "\u201d", "\u201e": "\u201d", "\u00ab": "\u00bb",
           "\u2039": "\u203a", "\u300c": "\u300d", "\u300e": "\u300f", "\uff02": "\uff02",
           "\u201f": "\u201d"}  # fmt: skip


def _quoted(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].lstrip(" ").startswith(">"):
        return True  # a quoted line, as in mail and Markdown
    i = 0
    while i < len(text):
        close = _QUOTES.get(text[i])
        if close is None:
            i += 1
            continue
        stop = text.find(close, i + 1)
        stop = len(text) if stop == -1 else stop
        if i < end and start <= stop:
            return True
        i = stop + 1
    return False


_SPEECH = re.compile(
    r"\b(?:said|says|told|tells|asked|asks|wrote|writes|claimed|claims"
    r"|replied|replies|added|adds|mentioned|mentions|stated|states|reported|reports|insisted"
    r"|insists|thinks|thought|believes|believed|argued|argues|messaged|emailed|texted|tweeted"
    r"|posted|commented|responded|answered|suggested|suggests|quote|quoted|quoting|according\s+to"
    r"|in\s+\S+\s+words|put\s+it)\b"
)
_DENIAL = re.compile(
    r"^(?:(?:oh|well|no|lol|ok|okay|but)\s+)*"
    r"(?:(?:that|this|it|what\s+follows|the\s+following)(?:'s|\s+is|\s+was|\s+are)?\s+|i'?m\s+"
    r"|i\s+am\s+|i\s+was\s+)?(?:(?:totally|completely|purely|entirely|just|only|so|all|a)\s+)?"
    r"(?:not\s+true|untrue|false|lie|lies|i\s+lied|lying|wrong|incorrect|not\s+really|not|no|nope"
    r"|kidding|joking|jk|a\s+joke|joke|sarcasm|sarcastic|ironic|irony|hypothetical(?:ly)?"
    r"|suppose|supposing|imagine|pretend|pretending|what\s+if|role-?play|fiction|made\s+up"
    r"|myth|rumou?r|counterfactual|for\s+example|example|for\s+instance|/s)"
    r"(?:\s+(?:speaking|at\s+all|though|here|below|obviously|of\s+course|lol))*$"
)
_OWN = re.compile(r"\b(?:i|we)\s+(?:\S+\s+){0,2}$")


def _introduced(text: str, start: int, verbs: re.Pattern[str], *, own_words_allowed: bool) -> bool:
    """Whether a clause ending in `:` introduces `start` and says `verbs`.

    A `...:` clause introduces the rest of its line, and a line ending in `:` the lines after it
    up to a blank line. With `own_words_allowed`, a verb whose subject is the person ("as I
    said:") does not count; otherwise the introducing clause must be short ("Not true:").
    """
    for clause in _heads(text, start):
        if not own_words_allowed:
            if verbs.match(_words(clause)):
                return True
        elif any(not _OWN.search(clause[: f.start()]) for f in verbs.finditer(clause)):
            return True
    return False


def _heads(text: str, start: int) -> Iterator[str]:
    """The clauses ending in `:` that introduce the text at `start`."""
    line_start = text.rfind("\n", 0, start) + 1
    heads = [text[line_start:start]]
    above_end = line_start - 1
    while above_end > 0:
        above_start = text.rfind("\n", 0, above_end) + 1
        above = text[above_start:above_end].rstrip(" ")
        if not above:
            break
        if above.endswith(":"):
            heads.append(above)
            break
        above_end = above_start - 1
    for head in heads:
        colon = head.rfind(":")
        while colon != -1:
            begin = max(head.rfind(c, 0, colon) for c in ".!?;:") + 1
            yield head[begin:colon]
            colon = head.rfind(":", 0, colon)


def _denied_after(text: str, end: int) -> bool:
    """Whether the rest of the clause's sentence, or the next sentence, only denies it."""
    for piece in re.split(r"[.!?;\n]+", text[end:], maxsplit=2)[:2]:
        words = _words(piece)
        if words:
            return _DENIAL.match(words) is not None
    return False


def _words(clause: str) -> str:
    return " ".join(re.sub(r"[()\[\]\-\u2013\u2014,:*~!]+", " ", clause).split())
