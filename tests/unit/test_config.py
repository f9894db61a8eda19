"""Config loading: strict validation, errors naming field and value, dotted overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import apply_overrides, dump_config, load_config
from services.common.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_defaults_and_file_values(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "seed: 7\npolicy:\n  server: {grpc_port: 50052}\n"))
    assert cfg.seed == 7
    assert cfg.policy.server.grpc_port == 50052
    assert cfg.env.server.grpc_port == 0
    assert cfg.consumer.max_deliveries == 5


def test_wrong_type_names_field_and_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "consumer:\n  max_deliveries: many\n"))
    message = str(err.value)
    assert "consumer.max_deliveries" in message
    assert '"many"' in message
    assert str(tmp_path / "run.yaml") in message


def test_unknown_key_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "reward:\n  server: {grpc_prot: 1}\n"))
    assert "reward.server.grpc_prot: unknown key" in str(err.value)


def test_out_of_range_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"env\.server\.grpc_port: .*65535.*\(got 70000\)"):
        load_config(write(tmp_path, "env:\n  server: {grpc_port: 70000}\n"))


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "seed: -1\nbogus: 1\n"))
    assert "seed:" in str(err.value) and "bogus: unknown key" in str(err.value)


def test_dotted_overrides_parse_yaml_values() -> None:
    cfg = load_config(None, ["consumer.backoff_s=[1, 2]", "nats.url=nats://h:4222", "launcher.services=[env]"])
    assert cfg.consumer.backoff_s == [1.0, 2.0]
    assert cfg.nats.url == "nats://h:4222"
    assert cfg.launcher.services == ["env"]


def test_override_errors() -> None:
    with pytest.raises(ConfigError, match="expected dotted.key=value"):
        apply_overrides({}, ["seed"])
    with pytest.raises(ConfigError, match="seed is 3, not a section"):
        apply_overrides({"seed": 3}, ["seed.x=1"])
    with pytest.raises(ConfigError, match="policy.server.grpc_port"):
        load_config(None, ["policy.server.grpc_port=abc"])


def test_missing_file_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(write(tmp_path, "- 1\n- 2\n"))


def test_dump_round_trips(tmp_path: Path) -> None:
    cfg = load_config(None, ["seed=3", "critic.server.metrics_port=9100"])
    again = load_config(write(tmp_path, dump_config(cfg)))
    assert again == cfg


def test_shipped_configs_are_valid() -> None:
    paths = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
    assert paths, "configs/ has no presets"
    for path in paths:
        assert load_config(path).run_name


def test_overrides_reach_list_entries_by_index() -> None:
    from services.common.config import apply_overrides
    from services.common.errors import ConfigError

    data = {"env": {"families": [{"type": "gym_text", "knobs": {"size": 4}}]}}
    out = apply_overrides(data, ["env.families.0.observation=window", "env.families.0.knobs.size=5"])
    assert out["env"]["families"][0] == {"type": "gym_text", "knobs": {"size": 5}, "observation": "window"}
    assert data["env"]["families"][0]["knobs"]["size"] == 4  # the input is not changed
    with pytest.raises(ConfigError, match="no index '3'"):
        apply_overrides(data, ["env.families.3.observation=window"])
    with pytest.raises(ConfigError, match="is a list"):
        apply_overrides(data, ["env.families.0=x"])


def test_the_model_proposer_needs_a_text_family_and_a_server() -> None:
    with pytest.raises(ConfigError, match="proposer 'model' writes text tasks: family type 'gym_text'"):
        load_config(None, ["env.families=[{type: gym_text, knobs: {size: 4, hole_prob: 0.2}, proposer: model}]"])
    with pytest.raises(ConfigError, match="set env.adaptation.model_proposer.base_url"):
        load_config(None, ["env.families=[{type: live, knobs: {hint: 0}, proposer: model}]"])
    config = load_config(None, ["env.families=[{type: live, knobs: {hint: 0}, proposer: model}]",
                                "env.adaptation.model_proposer.base_url=http://127.0.0.1:8000/v1"])
    assert config.env.families[0].proposer == "model"


def test_a_reproducible_run_generates_one_chat_per_call_in_sync_rounds() -> None:
    config = load_config(None, ["loop.reproducible=true", "policy.max_batch=64", "reward.max_batch=32"])
    assert (config.policy.max_batch, config.reward.max_batch) == (1, 1)
    assert "max_batch: 1" in dump_config(config)  # the resolved config says what ran
    assert load_config(None, ["policy.max_batch=64"]).policy.max_batch == 64  # off: as configured
    with pytest.raises(ConfigError, match="loop.reproducible needs loop.mode 'sync'.*loop.mode='async'"):
        load_config(None, ["loop.reproducible=true", "loop.mode=async"])


def test_web_browsers_must_cover_the_episodes_a_policy_worker_opens() -> None:
    web = "env.families=[{type: web, knobs: {task: 0}, browsers: 8}]"
    with pytest.raises(ConfigError, match=r"browsers=8 is below .* policy.rollout.concurrent_jobs=16 x max\(env.scheduler.group_size"
                                          r"=8, eval_group_size=4\) = 128"):
        load_config(None, [web])
    assert load_config(None, [web, "policy.rollout.concurrent_jobs=1"]).env.families[0].browsers == 8
    assert load_config(None, [web, "env.scheduler.enabled=false"]).env.families[0].type == "web"  # serves gRPC only


def test_nats_credentials_come_from_the_environment_variables_named(monkeypatch) -> None:
    from services.common.config.base import NatsConfig
    from services.common.errors import ConfigError
    assert NatsConfig().credentials() == {}
    monkeypatch.setenv("MY_NATS_USER", "rla")
    monkeypatch.setenv("MY_NATS_PASSWORD", "s3cret")
    cfg = NatsConfig(url="nats://nats:4222", user_env="MY_NATS_USER", password_env="MY_NATS_PASSWORD")
    assert cfg.credentials() == {"user": "rla", "password": "s3cret"}
    monkeypatch.delenv("MY_NATS_PASSWORD")
    with pytest.raises(ConfigError, match="nats.password_env='MY_NATS_PASSWORD' names an environment variable"):
        cfg.credentials()
