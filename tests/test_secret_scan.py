"""The CI secret scanner (.ci/scan_secrets.py) run as CI runs it, on throwaway git repositories.

Every planted value is synthetic and assembled at run time, so this file holds no key shape.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCANNER = Path(__file__).parent.parent / ".ci" / "scan_secrets.py"
FAKE_KEY_ID = "AK" + "IA" + "Z" * 8 + "Q7" * 4
PLANTED = "synthetic-" + "token-value-" + "0042"
FAKE_HOME = "/home/" + "synthetic-user-0042"
CLEAN = (
    "print('hello')\n"
    'HONCHO_API_KEY = os.environ["HONCHO_API_KEY"]\n'
    'PRIVATE_KEY = "private_key"\n'
    "API_KEY=${API_KEY}\n"
    'password = ""\n'
)


def environment() -> dict[str, str]:
    """The caller's environment without secret-named variables, with a made-up home."""
    suffixes = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith(suffixes)}
    env["HOME"] = FAKE_HOME
    return env


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "--", *files], check=True)
    return root


def scan(root: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, str(SCANNER), *args],
        cwd=root,
        env=env if env is not None else environment(),
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_clean_repository_passes(tmp_path):
    result = scan(repo(tmp_path, {"a.py": CLEAN, "docs/b.md": "no secrets here\n"}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "scan_secrets: no secrets found in the repository"


def test_a_planted_key_fails_and_is_never_printed_whole(tmp_path):
    root = repo(tmp_path, {"a.py": CLEAN, "src/config.py": f"x = 1\nkey = '{FAKE_KEY_ID}'\n"})
    result = scan(root)
    assert result.returncode == 1
    assert "src/config.py:2: aws-access-key-id" in result.stdout
    assert FAKE_KEY_ID not in result.stdout + result.stderr
    assert FAKE_KEY_ID[:5] not in result.stdout


@pytest.mark.parametrize(
    "text",
    [
        "-----BEGIN " + "EC PRIVATE KEY-----\n",
        "tok = 'gh" + "p_" + "x" * 36 + "'\n",
        "HONCHO_API_KEY=" + "hk-" + "synthetic0042\n",
        'password = "' + "synthetic-0042" + '"\n',
        "eyJ" + "hbGciOi0042" + ".eyJ" + "zdWIi0042" + ".c2ln0042abc\n",
    ],
    ids=["pem", "github", "honcho-assignment", "password", "jwt"],
)
def test_each_key_shape_fails(tmp_path, text):
    result = scan(repo(tmp_path, {"leak.txt": text}))
    assert result.returncode == 1, result.stdout
    assert "leak.txt:1: " in result.stdout


def test_environment_values_and_the_home_directory_fail(tmp_path):
    files = {"notes.md": f"copied {PLANTED} here\n", "log.txt": f"\nsaved {FAKE_HOME}/x.csv\n"}
    env = {**environment(), "SERVICE_TOKEN": PLANTED}
    result = scan(repo(tmp_path, files), env=env)
    assert result.returncode == 1
    assert "notes.md:1: env-value" in result.stdout
    assert "log.txt:2: home-directory" in result.stdout
    assert PLANTED not in result.stdout and FAKE_HOME not in result.stdout


def test_the_allowlist_admits_reviewed_values_and_path_rule_pairs(tmp_path):
    files = {
        "tests/fixture.py": f"KEY = '{FAKE_KEY_ID}'\n",
        "tests/pem.py": "-----BEGIN " + "PRIVATE KEY-----\n",
        ".ci/secret-allowlist.txt": (
            f"# reviewed\nvalue {FAKE_KEY_ID}\npath tests/pem.py:private-key\n"
        ),
    }
    result = scan(repo(tmp_path, files))
    assert result.returncode == 0, result.stdout


def test_a_malformed_allowlist_is_an_error(tmp_path):
    files = {"a.py": CLEAN, ".ci/secret-allowlist.txt": "allow everything\n"}
    result = scan(repo(tmp_path, files))
    assert result.returncode == 2
    assert "secret-allowlist.txt:1" in result.stderr


def test_the_wheel_is_scanned_member_by_member(tmp_path):
    root = repo(tmp_path, {"a.py": CLEAN})
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/__init__.py", "\n\nTOKEN = '" + FAKE_KEY_ID + "'\n")
        archive.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\n")
    result = scan(root, "--wheel", str(wheel))
    assert result.returncode == 1
    assert "pkg-1.0-py3-none-any.whl!pkg/__init__.py:3: aws-access-key-id" in result.stdout
    clean = tmp_path / "clean.whl"
    with zipfile.ZipFile(clean, "w") as archive:
        archive.writestr("pkg/__init__.py", CLEAN)
    assert scan(root, "--wheel", str(clean)).returncode == 0
