"""Typed configuration, resolved from defaults, then a TOML file, then ``LOGSTORE_*`` env, then flags.

Pure: ``resolve`` takes the file's parsed content, the environment and the flags as data and returns a
frozen ``Config``; only ``load_file`` touches the disk. Unknown keys are errors that name the nearest
valid key, so a typo in a config file never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from logstore_cli.errors import ConfigError

DEFAULT_WAREHOUSE = "./warehouse"
DEFAULT_KAFKA_TIMEOUT_S = 10.0


def _frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class KafkaConfig:
    # None: the DDL's own address, else the local broker started by 'logstore broker start'.
    bootstrap_servers: str | None = None
    # librdkafka client properties applied to every table's client (DDL passthrough keys win).
    client: Mapping[str, str] = field(default_factory=_frozen)
    timeout_s: float = DEFAULT_KAFKA_TIMEOUT_S


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=_frozen)


@dataclass(frozen=True)
class Config:
    warehouse: str = DEFAULT_WAREHOUSE
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: str | None = None  # the file it was read from, for messages

    def warehouse_path(self, cwd: Path | None = None) -> Path:
        path = Path(self.warehouse).expanduser()
        return path if path.is_absolute() else (cwd or Path.cwd()) / path


# Environment variables and the config key each sets.
ENV_VARS: dict[str, str] = {
    "LOGSTORE_WAREHOUSE": "warehouse",
    "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS": "kafka.bootstrap_servers",
    "LOGSTORE_KAFKA_TIMEOUT": "kafka.timeout_s",
    "LOGSTORE_SPARK_MASTER": "spark.master",
}
CONFIG_ENV = "LOGSTORE_CONFIG"


@dataclass(frozen=True)
class Overrides:
    """Values given as command-line flags; None means not given."""

    warehouse: str | None = None
    bootstrap_servers: str | None = None
    kafka_timeout_s: float | None = None
    spark_master: str | None = None
    spark_conf: Mapping[str, str] = field(default_factory=_frozen)


def load_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"config file not found: {path}",
            hint="pass an existing file with --config, or unset LOGSTORE_CONFIG",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint="fix the syntax") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None


def resolve(
    file_data: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Overrides | None = None,
    *,
    source: str | None = None,
) -> Config:
    """Defaults < file < env < flags. Pure."""
    cfg = _from_file(file_data or {}, source or "<config>")
    cfg = replace(cfg, source=source)
    for var, key in ENV_VARS.items():
        value = (env or {}).get(var)
        if value:
            cfg = _set(cfg, key, value, f"environment variable {var}")
    o = overrides or Overrides()
    flags = (
        ("warehouse", o.warehouse, "--warehouse"),
        ("kafka.bootstrap_servers", o.bootstrap_servers, "--bootstrap-servers"),
        ("kafka.timeout_s", o.kafka_timeout_s, "--kafka-timeout"),
        ("spark.master", o.spark_master, "--master"),
    )
    for key, flag_value, flag in flags:
        if flag_value is not None:
            cfg = _set(cfg, key, flag_value, flag)
    if o.spark_conf:
        merged = {**cfg.spark.conf, **o.spark_conf}
        cfg = replace(cfg, spark=replace(cfg.spark, conf=_frozen(merged)))
    return cfg


def load(
    config_path: Path | None, env: Mapping[str, str], overrides: Overrides | None = None
) -> Config:
    """Resolve the configuration: ``--config``, else ``LOGSTORE_CONFIG``, else defaults only."""
    path = config_path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    data = load_file(path) if path else {}
    return resolve(data, env, overrides, source=str(path) if path else None)


def _set_warehouse(c: Config, v: Any) -> Config:
    return replace(c, warehouse=v)


def _set_bootstrap(c: Config, v: Any) -> Config:
    return replace(c, kafka=replace(c.kafka, bootstrap_servers=v))


def _set_timeout(c: Config, v: Any) -> Config:
    return replace(c, kafka=replace(c.kafka, timeout_s=v))


def _set_client(c: Config, v: Any) -> Config:
    return replace(c, kafka=replace(c.kafka, client=_frozen(v)))


def _set_master(c: Config, v: Any) -> Config:
    return replace(c, spark=replace(c.spark, master=v))


def _set_spark_conf(c: Config, v: Any) -> Config:
    return replace(c, spark=replace(c.spark, conf=_frozen(v)))


# Every settable key: its kind ("str", "seconds", "table") and how to set it.
_KEYS: dict[str, tuple[str, Callable[[Config, Any], Config]]] = {
    "warehouse": ("str", _set_warehouse),
    "kafka.bootstrap_servers": ("str", _set_bootstrap),
    "kafka.timeout_s": ("seconds", _set_timeout),
    "kafka.client": ("table", _set_client),
    "spark.master": ("str", _set_master),
    "spark.conf": ("table", _set_spark_conf),
}
_SECTIONS = ("kafka", "spark")


def _unknown(key: str, where: str) -> ConfigError:
    near = difflib.get_close_matches(key, list(_KEYS), n=1)
    hint = f"did you mean '{near[0]}'?" if near else f"valid keys: {', '.join(_KEYS)}"
    return ConfigError(f"{where}: unknown config key '{key}'", hint=hint)


def _from_file(data: Mapping[str, Any], where: str) -> Config:
    cfg = Config()
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: '{key}' must be a table ([{key}])")
            for sub, subval in value.items():
                cfg = _set(cfg, f"{key}.{sub}", subval, where)
        else:
            cfg = _set(cfg, key, value, where)
    return cfg


def _set(cfg: Config, key: str, value: Any, where: str) -> Config:
    """Set one key, checking and converting its value."""
    if key not in _KEYS:
        raise _unknown(key, where)
    kind, setter = _KEYS[key]
    return setter(cfg, _convert(value, kind, key, where))


def _convert(value: Any, kind: str, key: str, where: str) -> Any:
    if kind == "table":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: '{key}' must be a table of key = value pairs")
        return {str(k): _scalar(v) for k, v in value.items()}
    if kind == "seconds":
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{where}: '{key}' must be a number of seconds, got {value!r}"
            ) from None
        if number <= 0:
            raise ConfigError(f"{where}: '{key}' must be positive, got {value!r}")
        return number
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where}: '{key}' must be a string, got {value!r}")
    return str(value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
