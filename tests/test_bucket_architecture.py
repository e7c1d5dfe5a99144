"""The S3 SDK loads only for a bucket store: never for a local CLI command (nor in a kernel:
`tests/test_architecture.py` checks that).

boto3 costs about 0.3 s of import; `artmem --help`, `status` and `search` on a local store must
not pay it. Checked through `sys.modules` in fresh interpreters (indirect imports count too).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from host_helpers import write_config

ROOT = Path(__file__).parent.parent
SDK = re.compile(r"(boto3|botocore|s3transfer|cas\._bucket)(\..*)?")
_PROBE = (
    "import atexit, json, os, sys\n"
    "atexit.register(lambda: os.write(3, json.dumps(sorted(sys.modules)).encode()))\n"
    "from harness_plugin.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _loaded_by_cli(config: Path, cwd: Path, *argv: str) -> list[str]:
    read_fd, write_fd = os.pipe()
    env = {**os.environ, "ARTMEM_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE.replace("3", str(write_fd), 1), *argv],
        cwd=cwd, env=env, pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        raw = pipe.read()
    proc.wait(timeout=120)
    return [name for name in json.loads(raw) if SDK.fullmatch(name)]


def test_local_cli_commands_never_load_the_sdk(tmp_path: Path):
    config, project = write_config(tmp_path)
    for argv in (("--help",), ("status",), ("search", "anything"), ("status", "--json")):
        assert _loaded_by_cli(config, project, *argv) == [], argv


def test_a_bucket_configuration_loads_no_sdk_until_the_bucket_is_used(tmp_path: Path):
    config, project = write_config(
        tmp_path,
        '[storage]\nbackend = "s3"\nbucket = "lab-x"\nendpoint_url = "http://127.0.0.1:9"\n',
    )
    assert _loaded_by_cli(config, project, "--help") == []
