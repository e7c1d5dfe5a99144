"""Consent for memory notes: only the person's own plain statements (memory._consent)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_plugin.memory._consent import Refusal, consent

WITHHELD, QUESTION, REPORTED, DENIED = (
    Refusal.WITHHELD,
    Refusal.QUESTION,
    Refusal.REPORTED,
    Refusal.DENIED,
)

REFUSED = [
    # the attacker's cases (issue 30)
    ("Don't remember this: my PIN is 4821.", "my PIN is 4821", WITHHELD),
    ("Never store the following. I was diagnosed with asthma.", "I was diagnosed with asthma",
     WITHHELD),
    ("Bob said: I hate Parquet.", "I hate Parquet", REPORTED),
    ("I like tabs?", "I like tabs", QUESTION),
    ("Not true: I like tabs.", "I like tabs", DENIED),
    # other phrasings of a refusal
    ("Do not keep the following in memory:\n- I was diagnosed with asthma\n- my PIN is 4821",
     "my PIN is 4821", WITHHELD),
    ("Please don\u2019t save this. My salary is 90k.", "My salary is 90k", WITHHELD),
    ("I don't want you to remember this: I was diagnosed with asthma.",
     "I was diagnosed with asthma", WITHHELD),
    ("You must not remember this. I was diagnosed with asthma.", "I was diagnosed with asthma",
     WITHHELD),
    ("Forget what I said about cohorts.\nWe keep three cohorts.", "We keep three cohorts",
     WITHHELD),
    ("Off the record, my salary is 90k.\nI prefer tabs.", "I prefer tabs", WITHHELD),
    ("Between you and me: the deadline slips.", "the deadline slips", WITHHELD),
    ("Not for your notes: the deadline slips.", "the deadline slips", WITHHELD),
    ("No need to write this down; the deadline slips.", "the deadline slips", WITHHELD),
    ("This is not to be stored. The deadline slips.", "The deadline slips", WITHHELD),
    ("Strictly confidential: the deadline slips.", "the deadline slips", WITHHELD),
    ("My PIN is 4821. Don't keep that.", "My PIN is 4821", WITHHELD),
    ("My PIN is 4821. Please forget it!", "My PIN is 4821", WITHHELD),
    ("my PIN is 4821, do not store it", "my PIN is 4821, do not store it", WITHHELD),
    ("DON'T REMEMBER THIS: MY PIN IS 4821.", "my pin is 4821", WITHHELD),
    # questions
    ("Do we keep three cohorts? I think so.", "Do we keep three cohorts", QUESTION),
    ("I like tabs?!", "I like tabs", QUESTION),
    # quoted or reported speech
    ('He told me: "I hate Parquet."', "I hate Parquet", REPORTED),
    ("\u201cI hate Parquet.\u201d That is what she wrote.", "I hate Parquet", REPORTED),
    ("> I hate Parquet\nWhat do you think", "I hate Parquet", REPORTED),
    ("My colleague wrote:\nI hate Parquet.\nWe use CSV.", "We use CSV", REPORTED),
    ("According to Bob: the cutoff is sixty.", "the cutoff is sixty", REPORTED),
    # reported speech holds to the end of its line (refusing is the safe side)
    ('Bob said: "I hate Parquet." I love Parquet!', "I love Parquet", REPORTED),
    # denials, jokes, hypotheses
    ("That's a lie: I like tabs.", "I like tabs", DENIED),
    ("Hypothetically: the cutoff is sixty.", "the cutoff is sixty", DENIED),
    ("I like tabs. Just kidding!", "I like tabs", DENIED),
    ("I like tabs. Not true.", "I like tabs", DENIED),
    ("I like tabs. (Not really!)", "I like tabs", DENIED),
    ("I like tabs (not really).", "I like tabs", Refusal.UNGROUNDED),
    # not said at all
    ("I do not like CSV exports.", "like CSV exports", Refusal.UNGROUNDED),
    ("What is the cohort count?", "The user prefers CSV", Refusal.UNGROUNDED),
]  # fmt: skip

ACCEPTED = [
    ("Please remember: I prefer Parquet over CSV for results.",
     "i prefer parquet over CSV for results"),
    ("I do not like CSV exports. Parquet is fine.", "I do not like CSV exports"),
    ("Correction on the cohorts: it is four groups now, not three. The pilot merged two arms.",
     "Correction on the cohorts: it is four groups now, not three"),
    ("We never store raw data on laptops. I prefer Parquet.", "I prefer Parquet"),
    ("We never store raw data on laptops.", "We never store raw data on laptops"),
    ("Don't forget to save the plots. I prefer Parquet.", "I prefer Parquet"),
    ("I prefer Parquet. Don't store my password though.", "I prefer Parquet"),
    ("As I said: I prefer Parquet.", "I prefer Parquet"),
    ("I always forget my keys. I prefer Parquet.", "I prefer Parquet"),
    ("The randomisation seed for the bootstrap is 7741 and must not change.",
     "The randomisation seed for the bootstrap is 7741 and must not change"),
    ("False positives: we saw three in the cohort table.", "we saw three in the cohort table"),
    ("Remember these:\n- I prefer Parquet\n- I use tabs", "I use tabs"),
    ("The confidence interval is 0.95. I like tabs.", "I like tabs"),
    ("I like tabs. Not a fan of spaces.", "I like tabs"),
]  # fmt: skip


@pytest.mark.parametrize(("latest", "content", "reason"), REFUSED)
def test_what_the_person_did_not_assert_is_refused(latest, content, reason):
    assert consent(content, latest) is reason


@pytest.mark.parametrize(("latest", "content"), ACCEPTED)
def test_plain_statements_are_accepted(latest, content):
    assert consent(content, latest) is None


REFUSALS = [
    "don't remember", "do not remember", "never remember", "don't store", "do not store",
    "never store", "don't keep", "do not keep", "never keep", "don't save", "please don't record",
    "do not log", "don't memorize", "never write down", "don't note", "you should not retain",
    "stop recording", "no need to remember", "I'd rather you didn't keep", "forget",
    "please forget", "I don't want you to store",
]  # fmt: skip
OBJECTS = ["this", "the following", "what follows", "any of this", "the next part", "it"]
INTRODUCERS = [": ", ":\n", ". ", ".\n", "!\n", ":\n\n- ", " - here goes: "]
STATEMENTS = ["my PIN is 4821", "I was diagnosed with asthma", "I prefer Parquet",
              "my salary is ninety thousand"]  # fmt: skip
HEADS = ["", "Okay. ", "One more thing.\n", "Hi!\n"]


@given(
    st.sampled_from(HEADS),
    st.sampled_from(REFUSALS),
    st.sampled_from(OBJECTS),
    st.sampled_from(INTRODUCERS),
    st.sampled_from(STATEMENTS),
    st.booleans(),
)
def test_any_phrasing_of_a_refusal_withholds_what_follows(
    head, refusal, obj, introducer, statement, shout
):
    latest = f"{head}{refusal} {obj}{introducer}{statement}. Thanks."
    if shout:
        latest = latest.upper()
    assert consent(statement, latest) is Refusal.WITHHELD


@given(
    st.sampled_from(["Bob", "My manager", "The reviewer", "She", "They"]),
    st.sampled_from(["said", "says", "wrote", "told me", "claims", "replied", "asked"]),
    st.sampled_from([": ", ":\n"]),
    st.sampled_from(STATEMENTS),
)
def test_someone_elses_words_are_reported_speech(who, verb, colon, statement):
    assert consent(statement, f"{who} {verb}{colon}{statement}.") is Refusal.REPORTED


@given(
    st.sampled_from(
        [
            "Not true",
            "That's not true",
            "False",
            "Just kidding",
            "Hypothetically",
            "Imagine",
            "That is a lie",
            "Nope",
        ]
    ),  # fmt: skip
    st.sampled_from(STATEMENTS),
    st.booleans(),
)
def test_a_denied_statement_is_not_consent(denial, statement, before):
    latest = f"{denial}: {statement}." if before else f"{statement}. {denial}!"
    assert consent(statement, latest) is Refusal.DENIED


@given(st.sampled_from(HEADS), st.sampled_from(STATEMENTS), st.sampled_from([".", "!", ""]))
def test_a_plain_statement_is_consent(head, statement, end):
    assert consent(statement, f"{head}{statement}{end}") is None
