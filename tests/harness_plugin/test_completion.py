"""`artmem completion`: scripts made from the parser, run by a real bash; ids from the cards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import write_config

BIN = Path(sys.executable).parent
EXE = str(BIN / "artmem")


@pytest.fixture
def project(tmp_path):
    config, project_root = write_config(tmp_path)
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    env = {**os.environ, "ARTMEM_CONFIG": str(config), "PATH": f"{BIN}:{os.environ['PATH']}"}
    ids = []
    for name in ("a.csv", "b.csv"):
        (exports / name).write_text(f"x\n{len(ids)}\n")
        done = subprocess.run(
            [EXE, "record", "--session", "s1", name, "--title", name, "--summary", "S",
             "--query-fingerprint", fingerprint(name), "--source", "w", "--source-version", "v1",
             "--media-type", "text/csv", "--json"],
            capture_output=True, text=True, env=env, cwd=project_root, check=True,
        )  # fmt: skip
        ids.append(done.stdout.split('"experiment_id":"')[1].split('"')[0])
    return env, project_root, ids


def _complete(project, words: list[str]) -> list[str]:
    """Run bash's completion function on `words` (the last is being typed)."""
    env, cwd, _ = project
    script = subprocess.run([EXE, "completion", "bash"], capture_output=True, text=True, check=True)
    quoted = " ".join(f"'{word}'" for word in words)
    probe = (
        f"{script.stdout}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        '_artmem; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, env=env, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completes_commands_options_and_experiment_ids(project):
    _, _, ids = project
    assert _complete(project, ["artmem", "sl"]) == ["slice"]
    assert _complete(project, ["artmem", "--config", "x.toml", "exp"]) == ["export"]
    assert _complete(project, ["artmem", "slice", "--col"]) == ["--columns"]
    assert set(_complete(project, ["artmem", "show", "exp_"])) == set(ids)
    first = ids[0]
    assert _complete(project, ["artmem", "slice", "--where", "x > 1", first[:12]]) == [first]


def test_ids_are_the_projects_newest_first_and_filtered_by_prefix(project):
    env, cwd, ids = project
    listed = subprocess.run(
        [EXE, "completion", "ids"], capture_output=True, text=True, env=env, cwd=cwd, check=True
    ).stdout.split()
    assert listed == ids[::-1]
    unprefixed = ids[1].removeprefix("exp_")[:6]
    narrowed = subprocess.run(
        [EXE, "completion", "ids", unprefixed], capture_output=True, text=True, env=env, cwd=cwd
    ).stdout.split()
    assert ids[1] in narrowed


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_parses_in_its_shell(shell):
    script = subprocess.run([EXE, "completion", shell], capture_output=True, text=True, check=True)
    assert "artmem" in script.stdout
    runner = shutil.which(shell)
    if runner is None:
        pytest.skip(f"{shell} is not installed")
    checked = subprocess.run([runner, "-n"], input=script.stdout, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_help_does_not_load_completion():
    probe = (
        "import sys\nfrom harness_plugin.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('harness_plugin.cli._completion' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip().endswith("False")
