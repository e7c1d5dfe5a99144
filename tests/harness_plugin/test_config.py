"""Configuration is strict and validated at start."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cards import ConfigError, UnknownProject
from harness_plugin import config
from harness_plugin._stores import build_store
from harness_plugin.config import load_config, parse_config


def _toml(tmp_path: Path, extra: str = "", **roots: str) -> str:
    values = {
        "artifact_root": str(tmp_path / "artifacts"),
        "rlm_root": str(tmp_path / "rlm"),
        "state_root": str(tmp_path / "state"),
    }
    values.update(roots)
    head = "\n".join(f'{k} = "{v}"' for k, v in values.items())
    projects = f"""
[[projects]]
id = "trial-analysis"
root = "{tmp_path / "work" / "trial"}"

[[projects]]
id = "nested"
root = "{tmp_path / "work" / "trial" / "sub"}"
"""
    return head + "\n" + extra + "\n" + projects


def test_the_documented_shape_parses(tmp_path):
    config = parse_config(
        _toml(tmp_path, 'integrity = "always"\n')
        + "\n[limits]\nartifact_bytes = 1000\n[honcho]\nenabled = false\n"
    )
    assert config.integrity == "always"
    assert config.effective_limits.artifact_bytes == 1000
    assert config.effective_limits.cards_per_project == 10_000


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("surprise = 1\n", "surprise"),
        ('integrity = "sometimes"\n', "integrity"),
    ],
)
def test_unknown_or_invalid_keys_fail(tmp_path, text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config(_toml(tmp_path, text))


def test_unknown_key_in_a_table_fails(tmp_path):
    with pytest.raises(ConfigError, match="limits"):
        parse_config(_toml(tmp_path) + "\n[limits]\nartifact_bytez = 1\n")


def test_limits_on_models_may_not_be_raised(tmp_path):
    with pytest.raises(ConfigError, match="lowered"):
        parse_config(_toml(tmp_path) + "\n[limits]\nsearch_results = 21\n")
    with pytest.raises(ConfigError, match="above"):  # past the ceiling of a raisable bound
        parse_config(_toml(tmp_path) + "\n[limits]\nartifact_bytes = 9999999999999\n")


def test_an_operator_may_raise_the_byte_bounds(tmp_path):
    text = "\n[limits]\nartifact_bytes = 2147483648\nproject_bytes = 107374182400\n"
    limits = parse_config(_toml(tmp_path) + text).effective_limits
    assert (limits.artifact_bytes, limits.project_bytes) == (2 << 30, 100 << 30)


def test_invalid_toml_fails(tmp_path):
    with pytest.raises(ConfigError, match="TOML"):
        parse_config("artifact_root = ")


@pytest.mark.parametrize("bad", ["relative/path", "/a/../b", "/a/./b", "/a//b"])
def test_roots_must_be_absolute_and_normalised(tmp_path, bad):
    with pytest.raises(ConfigError, match="artifact_root"):
        parse_config(_toml(tmp_path, artifact_root=bad))


def test_roots_must_not_overlap(tmp_path):
    with pytest.raises(ConfigError, match="overlap"):
        parse_config(_toml(tmp_path, artifact_root=str(tmp_path / "rlm" / "artifacts")))
    with pytest.raises(ConfigError, match="overlap"):
        parse_config(_toml(tmp_path, state_root=str(tmp_path / "rlm")))


def test_root_prefix_is_not_overlap(tmp_path):
    parse_config(_toml(tmp_path, artifact_root=str(tmp_path / "rlm2")))


def test_dangerous_roots_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="filesystem root"):
        parse_config(_toml(tmp_path, artifact_root="/"))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ConfigError, match="home"):
        parse_config(_toml(tmp_path, artifact_root=str(home)))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    with pytest.raises(ConfigError, match="repository"):
        parse_config(_toml(tmp_path, artifact_root=str(repo)))


def test_store_roots_must_not_live_inside_a_project(tmp_path):
    inside = str(tmp_path / "work" / "trial" / "artifacts")
    with pytest.raises(ConfigError, match="inside the root of project"):
        parse_config(_toml(tmp_path, artifact_root=inside))


def test_project_ids_are_validated_and_unique(tmp_path):
    with pytest.raises(ConfigError):
        parse_config(_toml(tmp_path).replace('id = "nested"', 'id = "bad/id"'))
    with pytest.raises(ConfigError, match="unique"):
        parse_config(_toml(tmp_path).replace('id = "nested"', 'id = "trial-analysis"'))


def test_project_from_the_working_directory_is_the_longest_match(tmp_path):
    config = parse_config(_toml(tmp_path))
    trial = tmp_path / "work" / "trial"
    (trial / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "work" / "trial2").mkdir()
    assert config.project_for(str(trial)) == "trial-analysis"
    assert config.project_for(str(trial / "sub" / "deep")) == "nested"
    with pytest.raises(UnknownProject):
        config.project_for(str(tmp_path / "work" / "trial2"))  # a prefix is not containment
    assert config.project_for(str(tmp_path), explicit="nested") == "nested"
    with pytest.raises(UnknownProject):
        config.project_for(str(trial), explicit="elsewhere")


def test_load_config_from_flag_or_environment(tmp_path):
    path = tmp_path / "artmem.toml"
    path.write_text(_toml(tmp_path))
    assert load_config(str(path), environ={}).rlm_root == str(tmp_path / "rlm")
    assert load_config(None, environ={"ARTMEM_CONFIG": str(path)}).projects
    with pytest.raises(ConfigError, match="ARTMEM_CONFIG"):
        load_config(None, environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.toml"), environ={})
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(str(path), environ={})


def test_config_never_needs_the_directories_to_exist(tmp_path):
    config = parse_config(_toml(tmp_path))
    assert not os.path.exists(config.artifact_root)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[slice]\nmax_rows = "10"\n', "slice.max_rows"),
        ('[limits]\nartifact_bytes = "1000"\n', "limits.artifact_bytes"),
        ('[tools]\nartifact_memory = "yes"\n', "tools.artifact_memory"),
        ('[honcho]\nmax_attempts = "5"\n', "honcho.max_attempts"),
    ],
)
def test_quoted_numbers_and_booleans_are_not_coerced(tmp_path, text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config(_toml(tmp_path) + "\n" + text)


def test_a_trailing_slash_root_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="artifact_root.*trailing"):
        parse_config(_toml(tmp_path, artifact_root=str(tmp_path / "artifacts") + "/"))


def test_the_owner_check_of_exports_is_on_unless_turned_off(tmp_path):
    assert build_store(parse_config(_toml(tmp_path)), "trial-analysis").require_owner
    off = parse_config(_toml(tmp_path, "[ingest]\nrequire_owner = false\n"))
    assert not build_store(off, "trial-analysis").require_owner
    with pytest.raises(ConfigError):
        parse_config(_toml(tmp_path, '[ingest]\nrequire_owner = "no"\n'))
    with pytest.raises(ConfigError):
        parse_config(_toml(tmp_path, "[ingest]\nowner = false\n"))


def test_the_readme_configuration_example_parses_as_written():
    main, *_ = _readme_toml_blocks()
    config = parse_config(main)
    assert config.ingest.require_owner and config.slice.max_seconds == 30


def _readme_toml_blocks() -> list[str]:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [part.split("```", 1)[0] for part in readme.split("```toml\n")[1:]]
    assert len(blocks) == 3  # the main example, the bucket, the conversational sections
    (main,) = [block for block in blocks if block.startswith("artifact_root =")]
    return [main, *(block for block in blocks if block is not main)]


def test_the_readme_conversational_sections_parse_with_the_main_example():
    main, *others = _readme_toml_blocks()
    (conversational,) = [block for block in others if "[capture]" in block]
    config = parse_config(main + "\n" + conversational)
    assert config.capture.mode == "off" and config.recall.timeout_ms == 1500


def test_the_readme_bucket_example_parses_with_the_main_example():
    main, *others = _readme_toml_blocks()
    (bucket,) = [block for block in others if 'backend = "s3"' in block]
    config = parse_config(main.split("[storage]")[0] + "\n" + bucket)
    assert config.storage.backend == "s3" and config.storage.bucket == "lab-artifacts"


def test_an_error_names_the_key_by_its_path(tmp_path):
    with pytest.raises(ConfigError, match=r"projects\.1\.colour: not a known key"):
        parse_config(_toml(tmp_path) + 'colour = "red"\n')
    with pytest.raises(ConfigError, match=r"honcho\.timeout_s: out of range: at most 120"):
        parse_config(_toml(tmp_path) + "\n[honcho]\ntimeout_s = inf\n")
    with pytest.raises(ConfigError, match=r"honcho\.timeout_s: out of range: greater than 0"):
        parse_config(_toml(tmp_path) + "\n[honcho]\ntimeout_s = nan\n")


@pytest.mark.parametrize("where", ["", "\n[limits]\n"])
def test_a_configuration_nesting_without_end_is_a_config_error(tmp_path, where):
    deep = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(ConfigError, match="nests too deeply"):
        parse_config(_toml(tmp_path) + where + deep if where else deep + _toml(tmp_path))


@pytest.mark.parametrize(
    ("table", "text"),
    [
        ("honcho", 'workspace_id = "artmem\\n"'),
        ("honcho", 'api_key_env = "HONCHO_API_KEY\\n"'),
        ("honcho", 'base_url = "http://127.0.0.1:8000\\n"'),
        ("storage", 'backend = "s3"\nbucket = "b-1"\nendpoint_url = "http://minio\\t:9000"'),
    ],
)
def test_a_final_newline_or_a_tab_never_passes_a_pattern(tmp_path, table, text):
    with pytest.raises(ConfigError, match=table):
        parse_config(_toml(tmp_path) + f"\n[{table}]\n{text}\n")


_COMPONENT = st.sampled_from(["a", "b", "ab", "a.b", "b1", "..a", " "])


@given(
    st.lists(_COMPONENT, max_size=5).map(lambda parts: "/" + "/".join(parts)),
    st.lists(_COMPONENT, max_size=5).map(lambda parts: "/" + "/".join(parts)),
)
def test_containment_of_roots_is_by_whole_components(path, root):
    parts, of_root = PurePosixPath(path).parts, PurePosixPath(root).parts
    assert config._inside(path, root) == (parts[: len(of_root)] == of_root)
