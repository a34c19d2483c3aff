import pytest

import appconfig
import appconfig.sources

SCHEMA = {"db": {"host": str, "port": int}, "app": {"debug": bool, "ratio": float}}
INI = "[db]\nhost = ini-host\nport = 5432\n\n[app]\ndebug = false\n"


def test_ini_values_are_coerced_by_schema():
    config = appconfig.load_config(INI + "ratio = 0.5\n", SCHEMA)
    assert config == {"db": {"host": "ini-host", "port": 5432}, "app": {"debug": False, "ratio": 0.5}}


def test_defaults_sit_under_ini():
    config = appconfig.load_config(INI, SCHEMA, defaults={"app": {"ratio": "1.5", "debug": "true"}})
    assert config["app"] == {"ratio": 1.5, "debug": False}


def test_unknown_keys_are_rejected():
    with pytest.raises(appconfig.ConfigError, match="unknown key: db.hots"):
        appconfig.load_config("[db]\nhots = x\n", SCHEMA)
    with pytest.raises(appconfig.ConfigError, match="unknown section: cache"):
        appconfig.load_config("[cache]\nsize = 1\n", SCHEMA)


def test_from_env_reads_prefixed_variables_only():
    env = {"HOME": "/root", "APP__DB__HOST": "env-host", "APPX__DB__HOST": "no", "APP__App__Debug": "1"}
    assert appconfig.sources.from_env(env) == {"db": {"host": "env-host"}, "app": {"debug": "1"}}
    assert appconfig.sources.from_env({"SVC__DB__PORT": "1"}, prefix="SVC") == {"db": {"port": "1"}}


def test_malformed_env_names_raise():
    for name in ["APP__DB", "APP__DB__HOST__X", "APP____HOST"]:
        with pytest.raises(appconfig.ConfigError, match=name):
            appconfig.sources.from_env({name: "x"})


def test_env_overrides_ini_and_defaults():
    config = appconfig.load_config(
        INI, SCHEMA, defaults={"app": {"ratio": "1.0"}}, env={"APP__DB__HOST": "env-host", "APP__APP__RATIO": "2.5"}
    )
    assert config["db"] == {"host": "env-host", "port": 5432}
    assert config["app"] == {"debug": False, "ratio": 2.5}


def test_env_values_are_coerced_and_checked():
    config = appconfig.load_config(INI, SCHEMA, env={"APP__DB__PORT": "6543"})
    assert config["db"]["port"] == 6543
    with pytest.raises(appconfig.ConfigError, match="unknown key: db.hots"):
        appconfig.load_config(INI, SCHEMA, env={"APP__DB__HOTS": "x"})


def test_bool_words():
    for word, expected in [("yes", True), ("ON", True), ("1", True), ("off", False), ("No", False), ("0", False)]:
        config = appconfig.load_config(f"[app]\ndebug = {word}\n", SCHEMA)
        assert config["app"]["debug"] is expected


def test_bad_values_raise_config_error_naming_the_key():
    with pytest.raises(appconfig.ConfigError) as info:
        appconfig.load_config("[db]\nport = abc\n", SCHEMA)
    assert str(info.value) == "db.port: expected int, got 'abc'"
    with pytest.raises(appconfig.ConfigError, match="app.debug: expected bool"):
        appconfig.load_config("[app]\ndebug = maybe\n", SCHEMA)
