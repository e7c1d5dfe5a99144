"""Judging what a probe showed against the corpus's expectations.

A probe is what the model would see: the injected block of a first step, or a tool's result. Each
expectation becomes an `Observation` of codes (what was expected, what was observed). Facts are
matched after collapsing whitespace and case. Leakage is judged apart, in `_leaks`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness_plugin.eval._corpus import Expect
from harness_plugin.eval._telemetry import Observation, estimated_tokens
from harness_plugin.memory._recall import CARDS_TITLE, FOOTER, GLOBAL_TITLE, HEADER, PROJECT_TITLE

_MARKER = re.compile(r"\[\s*/?\s*honcho memory", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_TITLES = (GLOBAL_TITLE, PROJECT_TITLE, CARDS_TITLE)
PRECEDENCE = "Current files, tests, explicit user corrections, and DSH policy take precedence."
FAIL_OPEN = {"recall.timeout", "recall.error", "recall.circuit_open"}


@dataclass(frozen=True)
class Seen:
    """What one probe showed: the block, or the tool's result, or why there was none."""

    method: str
    code: str  # `injected`, `ok`, or the reason or error code
    injection: str | None = None
    result: Mapping[str, object] | None = None
    budget_tokens: int | None = None
    max_items: int | None = None

    @property
    def text(self) -> str:
        """Everything the model sees from this probe, as one string."""
        if self.injection is not None:
            return self.injection
        return "\n".join(strings(self.result)) if self.result is not None else ""


@dataclass(frozen=True)
class Labelled:
    """A recorded experiment the corpus names: its id and the bytes written for it."""

    experiment_id: str
    sha256: str


def observe(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], read: Callable[[str], bytes]
) -> Observation:
    """Judge one expectation against what a probe showed."""
    expected, observed = _JUDGES[expect.expect](expect, seen, labels, read)
    return Observation(
        kind=expect.expect,
        expected=expected,
        observed=observed,
        passed=expected == observed,
        positive=expect.positive,
    )


_Judge = Callable[[Expect, Seen, Mapping[str, Labelled], Callable[[str], bytes]], tuple[str, str]]


def _present(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    assert expect.fact is not None
    return "present", "present" if norm(expect.fact) in norm(seen.text) else "absent"


def _absent(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    return "absent", _present(expect, seen)[1]


def _superseded(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    assert expect.fact is not None and expect.old is not None
    new, old = norm(expect.fact), norm(expect.old)
    if seen.injection is not None:
        lines = [norm(line) for line in seen.injection.splitlines()]
        fresh = [line for line in lines if new in line]
        labelled = any("(correction" in line for line in fresh)
        stale = any(old in line for line in lines if new not in line)
    else:
        items = _items(seen.result)
        fresh_items = [item for item in items if new in norm(str(item.get("text", "")))]
        stale_ids = {
            item.get("message_id")
            for item in items
            if old in norm(str(item.get("text", ""))) and new not in norm(str(item.get("text", "")))
        }
        fresh = [str(item.get("text")) for item in fresh_items]
        labelled = any(
            item.get("kind") == "correction"
            and (not stale_ids or item.get("supersedes") in stale_ids)
            for item in fresh_items
        )
        stale = bool(stale_ids)
    if fresh:
        return "present", "present" if labelled or not stale else "contradictory"
    return "present", "stale" if stale else "absent"


def _subordinate(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    assert expect.fact is not None
    fact = norm(expect.fact)
    if fact not in norm(seen.text):
        return "present", "absent"
    if seen.injection is not None:
        block = seen.injection
        lines = block.splitlines()
        holders = [line for line in lines if fact in norm(line)]
        good = (
            PRECEDENCE in block
            and _inert_block(block)
            and all(line.startswith("- ") and _DATE.search(line) for line in holders)
        )
    else:
        holders_items = [i for i in _items(seen.result) if fact in norm(str(i.get("text", "")))]
        notice = str((seen.result or {}).get("notice", ""))
        good = "take precedence" in notice and all(i.get("date") for i in holders_items)
    return "present", "present" if good else "not_subordinate"


def _inert(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    if seen.injection is not None:
        return "inert", "inert" if _inert_block(seen.injection) else "not_inert"
    result = seen.result
    if result is None:
        return "inert", "inert"  # nothing shown: nothing to act on
    ok = True
    if "hits" in result or "project" in result:
        ok = "untrusted" in str(result.get("notice", ""))
    for hit in _list(result.get("hits")):
        ok = ok and hit.get("trust") == "untrusted-data"
    for item in [*_items(result), *_list(result.get("conversation"))]:
        ok = ok and _inert_line(str(item.get("text", "")))
    for line in _list_str(result.get("global_context")):
        ok = ok and _inert_line(line)
    card = result.get("card")
    if isinstance(card, Mapping):
        ok = ok and card.get("trust") == "untrusted-data"
    return "inert", "inert" if ok else "not_inert"


def _within_budget(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    if seen.injection is None:
        return "within", "within"
    tokens = estimated_tokens(len(seen.injection))
    over = seen.budget_tokens is not None and tokens > seen.budget_tokens
    if seen.max_items is not None:
        for title in _TITLES:
            if _section_items(seen.injection, title) > seen.max_items:
                over = True
    return "within", "over" if over else "within"


def _no_injection(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    expected = expect.code or "no_injection"
    if seen.injection is not None:
        return expected, "injected"
    return expected, seen.code if expect.code else "no_injection"


def _no_results(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    if seen.method == "first-step" or seen.code == "ok":
        return "absent", "absent" if result_count(seen) == 0 else "present"
    return "absent", seen.code


def _fails_open(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    if seen.method == "first-step":
        return "failed_open", "failed_open" if seen.code in FAIL_OPEN else seen.code
    result = seen.result
    if result is None:
        return "failed_open", seen.code
    remote = result.get("remote")
    degraded = result.get("status") == "unavailable" or (
        isinstance(remote, Mapping) and remote.get("status") in ("timeout", "error")
    )
    return "failed_open", "failed_open" if degraded else "ok"


def _error(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    assert expect.code is not None
    return expect.code, seen.code


def _ok(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    return "ok", seen.code if seen.code != "injected" else "ok"


def _freshness(expect: Expect, seen: Seen, *_: object) -> tuple[str, str]:
    assert expect.value is not None
    found = (seen.result or {}).get("freshness")
    return expect.value.replace("-", "_"), str(found) if isinstance(found, str) else seen.code


def _hit(expect: Expect, seen: Seen, labels: Mapping[str, Labelled], *_: object) -> tuple[str, str]:
    hit = _find_hit(seen, labels, expect.experiment)
    expected = expect.value or "present"
    if hit is None:
        return expected, "absent" if seen.code == "ok" else seen.code
    return expected, str(hit.get("origin")) if expect.value else "present"


def _no_hit(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], *_: object
) -> tuple[str, str]:
    return "absent", "present" if _find_hit(seen, labels, expect.experiment) else "absent"


def _exact_first(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], *_: object
) -> tuple[str, str]:
    hits = _list((seen.result or {}).get("hits"))
    label = labels.get(expect.experiment or "")
    if not hits or label is None:
        return "exact", "absent" if seen.code == "ok" else seen.code
    first = hits[0]
    if first.get("experiment_id") != label.experiment_id:
        return "exact", "other_first"
    return "exact", "exact" if first.get("exact") else "not_exact"


def _not_exact(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], *_: object
) -> tuple[str, str]:
    hit = _find_hit(seen, labels, expect.experiment)
    return "not_exact", "exact" if hit is not None and hit.get("exact") else "not_exact"


def _same_experiment(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], *_: object
) -> tuple[str, str]:
    label = labels.get(expect.experiment or "")
    found = (seen.result or {}).get("experiment_id")
    if found is None or label is None:
        return "same", seen.code if seen.code != "ok" else "absent"
    return "same", "same" if found == label.experiment_id else "different"


def _identical_bytes(
    expect: Expect, seen: Seen, labels: Mapping[str, Labelled], read: Callable[[str], bytes]
) -> tuple[str, str]:
    label = labels.get(expect.experiment or "")
    path = (seen.result or {}).get("path")
    if label is None or not isinstance(path, str):
        return "identical", seen.code if seen.code != "ok" else "absent"
    digest = hashlib.sha256(read(path)).hexdigest()
    return "identical", "identical" if digest == label.sha256 else "differs"


_JUDGES: dict[str, _Judge] = {
    "present": _present,
    "absent": _absent,
    "superseded": _superseded,
    "subordinate": _subordinate,
    "inert": _inert,
    "within_budget": _within_budget,
    "no_injection": _no_injection,
    "no_results": _no_results,
    "fails_open": _fails_open,
    "error": _error,
    "ok": _ok,
    "freshness": _freshness,
    "hit": _hit,
    "no_hit": _no_hit,
    "exact_first": _exact_first,
    "not_exact": _not_exact,
    "same_experiment": _same_experiment,
    "identical_bytes": _identical_bytes,
}


def result_count(seen: Seen) -> int:
    """How many results a probe returned (items injected, hits, recalled items)."""
    if seen.injection is not None:
        return sum(1 for line in seen.injection.splitlines() if line.startswith("- "))
    result = seen.result or {}
    counted = 0
    for key in ("hits", "conversation", "project", "global_context"):
        counted += len(_list(result.get(key))) + len(_list_str(result.get(key)))
    if "path" in result or "experiment_id" in result:
        counted = max(counted, 1)
    return counted


def read_file(path: str) -> bytes:
    """The bytes of a resolved path (for `identical_bytes`)."""
    return Path(path).read_bytes()


def norm(text: str) -> str:
    """Whitespace collapsed, case folded: how facts are matched."""
    return " ".join(text.split()).casefold()


def strings(value: object) -> list[str]:
    """Every string inside a JSON value (keys left out)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in strings(item)]
    return []


def _inert_block(block: str) -> bool:
    """The block is exactly the spec's shape: one header, sections of one-line items, one end."""
    lines = block.split("\n")
    header = HEADER.split("\n")
    if lines[: len(header)] != header or lines[-1] != FOOTER:
        return False
    if len(_MARKER.findall(block)) != 2 or _CONTROL.search(block):
        return False
    body = lines[len(header) : -1]
    titles = [line for line in body if line in _TITLES]
    if len(titles) != len(set(titles)):
        return False
    return all(line == "" or line in _TITLES or line.startswith("- ") for line in body)


def _inert_line(text: str) -> bool:
    return "\n" not in text and not _MARKER.search(text) and not _CONTROL.search(text)


def _section_items(block: str, title: str) -> int:
    lines = block.split("\n")
    if title not in lines:
        return 0
    count = 0
    for line in lines[lines.index(title) + 1 :]:
        if not line.startswith("- "):
            break
        count += 1
    return count


def _find_hit(
    seen: Seen, labels: Mapping[str, Labelled], label: str | None
) -> Mapping[str, object] | None:
    wanted = labels.get(label or "")
    if wanted is None:
        return None
    for hit in _list((seen.result or {}).get("hits")):
        if hit.get("experiment_id") == wanted.experiment_id:
            return hit
    return None


def _items(result: Mapping[str, object] | None) -> list[Mapping[str, object]]:
    if result is None:
        return []
    return [*_list(result.get("project")), *_list(result.get("conversation"))]


def _list(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _list_str(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
