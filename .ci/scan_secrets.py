#!/usr/bin/env python3
"""Fail CI when a key, a token or a local path is committed or shipped (Honcho spec §17.2).

Usage: python3 .ci/scan_secrets.py [--wheel PATH] [--allowlist PATH] [--root DIR] [--untracked]

Scans every git-tracked file (`git ls-files`) of the repository holding DIR (the working
directory by default; `--untracked` adds new files git does not ignore, for a check before a
commit) and, with `--wheel`, every member of that built wheel, for:

- key shapes: AWS access key ids (AKIA/ASIA), GitHub tokens (ghp_/gho_/ghu_/ghs_/ghr_ and
  github_pat_), Slack tokens (xox*), OpenAI/Anthropic-style `sk-` keys, JWTs and PEM
  private-key headers. No public shape of a Honcho API key is known: Honcho keys are found by
  name (an assignment to HONCHO_API_KEY) and by value (below);
- assignments of a literal value: `HONCHO_API_KEY=...`, `*_API_KEY`/`*_KEY`/`*_TOKEN`/
  `*_SECRET`/`*_PASSWORD` = value, and quoted `password = "..."`-style values;
- environment leaks: the value of HONCHO_API_KEY and of every variable whose name ends in _KEY,
  _TOKEN, _SECRET or _PASSWORD (when set and at least 8 characters long), and the current user's
  home directory.

Each hit prints `path:line: rule (begins "abcd…")`, never more than a 4-character prefix of what
matched. Exit status: 0 no hit, 1 a hit, 2 a usage, git or wheel error.

Test fixtures hold synthetic secrets on purpose. The allowlist (`.ci/secret-allowlist.txt` in
the scanned repository unless `--allowlist` names another) lists the ones a reviewer checked,
one per line, `#` starting a comment:

    value <exact text>      that exact matched text is allowed wherever it appears
    path <file>:<rule>      every hit of <rule> in <file> (a repository path or a wheel member)

The allowlist itself is not scanned. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ALLOWLIST = Path(".ci") / "secret-allowlist.txt"
MIN_ENV_VALUE = 8
SHOWN_PREFIX = 4
_ENV_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
# A value that names where a secret comes from, rather than being one.
_NOT_LITERAL = r"(?!\$|%|<|\{|os\.|environ|getenv|env\b|\.\.\.|\*\*\*|x{4})"


@dataclass(frozen=True)
class Rule:
    """A named pattern; group `secret` (or the whole match) is the text that must not leak."""

    name: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Hit:
    """One match: where it is, which rule found it, and the matched text (never printed whole)."""

    path: str
    line: int
    rule: str
    secret: str

    def render(self) -> str:
        """`path:line: rule` and at most a 4-character prefix of the secret."""
        return f'{self.path}:{self.line}: {self.rule} (begins "{self.secret[:SHOWN_PREFIX]}…")'


@dataclass(frozen=True)
class Allowlist:
    """Reviewed synthetic values, and (path, rule) pairs whose hits are all allowed."""

    values: frozenset[str]
    pairs: frozenset[tuple[str, str]]

    def allows(self, hit: Hit) -> bool:
        """Whether `hit` is a reviewed fixture."""
        member = hit.path.split("!", 1)[-1]
        return hit.secret in self.values or bool(
            {(hit.path, hit.rule), (member, hit.rule)} & self.pairs
        )


def _rule(name: str, pattern: str) -> Rule:
    return Rule(name, re.compile(pattern))


KEY_RULES = (
    _rule("aws-access-key-id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    _rule("github-token", r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}"),
    _rule("github-token", r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}"),
    _rule("slack-token", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"),
    _rule("sk-api-key", r"(?<![A-Za-z0-9])sk-(?:proj-|ant-[a-z]{3,5}\d{2}-)?[A-Za-z0-9_-]{20,}"),
    _rule(
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    _rule("private-key", r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY-----"),
    _rule(
        "secret-assignment",
        r"(?<![A-Za-z0-9_])(?P<name>[A-Z][A-Z0-9_]{0,63}(?:_KEY|_TOKEN|_SECRET|_PASSWORD))"
        rf"[ \t]*[:=][ \t]*[\"']?{_NOT_LITERAL}(?P<secret>[^\s\"'`,;()\[\]{{}}<>]{{8,}})"
        r"(?=[\s\"'`,;]|$)",
    ),
    _rule(
        "password-assignment",
        r"(?i)(?<![A-Za-z0-9_])(?:password|passwd|pwd|passphrase|secret|client_secret"
        r"|api[_-]?key|access[_-]?token|auth[_-]?token)[\"']?[ \t]*[:=][ \t]*"
        rf"(?P<quote>[\"']){_NOT_LITERAL}(?P<secret>[^\s\"']{{8,}})(?P=quote)",
    ),
)


def environment_rules(environ: dict[str, str], home: str) -> list[Rule]:
    """Rules for the literal values of secret-named variables and for the home directory."""
    rules = []
    for name, value in sorted(environ.items()):
        secret_named = name == "HONCHO_API_KEY" or name.upper().endswith(_ENV_SUFFIXES)
        if secret_named and len(value) >= MIN_ENV_VALUE:
            rules.append(_rule("env-value", re.escape(value)))
    home = home.rstrip("/\\")
    if len(home) > 1:
        rules.append(_rule("home-directory", rf"(?<![\w./\\-]){re.escape(home)}(?![\w.-])"))
    return rules


def scan_text(path: str, text: str, rules: Iterable[Rule]) -> Iterator[Hit]:
    """Every hit of `rules` in `text`, with 1-based line numbers."""
    for rule in rules:
        for match in rule.pattern.finditer(text):
            groups = match.groupdict()
            secret = groups.get("secret") or match.group(0)
            if secret.lower() == (groups.get("name") or "").lower():
                continue  # `PRIVATE_KEY = "private_key"` names a kind, it holds no secret
            yield Hit(path, text.count("\n", 0, match.start()) + 1, rule.name, secret)


def tracked_files(root: Path, untracked: bool = False) -> list[str]:
    """The paths `git ls-files` reports, relative to `root`; with new unignored files if asked."""
    extra = ["--cached", "--others", "--exclude-standard"] if untracked else []
    listing = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", *extra], check=True, capture_output=True
    ).stdout
    return [os.fsdecode(raw) for raw in listing.split(b"\0") if raw]


def scan_repository(
    root: Path, rules: Sequence[Rule], skip: Path | None, untracked: bool = False
) -> Iterator[Hit]:
    """Hits in every tracked regular file under `root`, `skip` aside."""
    for relative in tracked_files(root, untracked):
        path = root / relative
        if path.is_symlink() or not path.is_file() or (skip and path.resolve() == skip):
            continue
        yield from scan_text(relative, path.read_bytes().decode("utf-8", "replace"), rules)


def scan_wheel(wheel: Path, rules: Sequence[Rule]) -> Iterator[Hit]:
    """Hits in every member of the wheel (a zip archive), named `wheel!member`."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.is_dir():
                text = archive.read(info).decode("utf-8", "replace")
                yield from scan_text(f"{wheel.name}!{info.filename}", text, rules)


def load_allowlist(path: Path) -> Allowlist:
    """Parse the allowlist; a missing file allows nothing.

    Raises:
        ValueError: a line is neither `value <text>` nor `path <file>:<rule>`.
    """
    values: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for number, line in enumerate(lines, 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        keyword, _, rest = entry.partition(" ")
        rest = rest.strip()
        if keyword == "value" and rest:
            values.add(rest)
        elif keyword == "path" and ":" in rest:
            file, _, rule = rest.rpartition(":")
            pairs.add((file, rule))
        else:
            raise ValueError(f"{path}:{number}: expected 'value <text>' or 'path <file>:<rule>'")
    return Allowlist(frozenset(values), frozenset(pairs))


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fail on keys, tokens or local paths.")
    parser.add_argument("--wheel", type=Path, help="also scan this built wheel")
    parser.add_argument("--allowlist", type=Path, help=f"default: <repository>/{ALLOWLIST}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="inside the repository")
    parser.add_argument(
        "--untracked", action="store_true", help="also scan new files git does not ignore"
    )
    return parser.parse_args(argv)


def _collect(args: argparse.Namespace, allowlist_path: Path, root: Path) -> list[Hit]:
    rules = [*KEY_RULES, *environment_rules(dict(os.environ), os.path.expanduser("~"))]
    hits = list(scan_repository(root, rules, allowlist_path.resolve(), args.untracked))
    if args.wheel is not None:
        hits += scan_wheel(args.wheel, rules)
    allowlist = load_allowlist(allowlist_path)
    return [hit for hit in hits if not allowlist.allows(hit)]


def main(argv: Sequence[str] | None = None) -> int:
    """Scan, print each hit, and return the exit status."""
    args = _arguments(argv)
    try:
        top = subprocess.run(
            ["git", "-C", str(args.root), "rev-parse", "--show-toplevel"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        root = Path(top)
        hits = _collect(args, args.allowlist or root / ALLOWLIST, root)
    except (OSError, ValueError, subprocess.CalledProcessError, zipfile.BadZipFile) as exc:
        print(f"scan_secrets: {exc}", file=sys.stderr)
        return 2
    for hit in sorted(hits, key=lambda h: (h.path, h.line, h.rule)):
        print(hit.render())
    where = "repository and wheel" if args.wheel else "repository"
    if hits:
        print(f"scan_secrets: {len(hits)} hit(s) in the {where}", file=sys.stderr)
        return 1
    print(f"scan_secrets: no secrets found in the {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
