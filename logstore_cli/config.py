"""Typed configuration, resolved from defaults, then a TOML file, then ``LOGSTORE_*`` env, then flags.

Every setting is declared once, in ``SETTINGS``: its TOML key, environment variable, flag, value kind
and help. The defaults are the dataclass fields' own. ``resolve``, the env table, the flag overrides,
the CLI options (``logstore_cli.cli.options``) and the user guide's table are all derived from it.

Pure: ``resolve`` takes the file's parsed content, the environment and the flags as data and returns a
frozen ``Config``; only ``load_file`` touches the disk. Unknown keys are errors that name the nearest
valid key, so a typo in a config file never silently falls back to a default; a bad value is an error
that names where it came from (flag, environment variable, or file and key) and what is valid.

Kafka client properties also come from ``LOGSTORE_KAFKA_CLIENT_<PROPERTY>`` variables (a secret
never has to be written into a file); nothing else is read from the environment, and no value is
ever expanded (``${VAR}`` in a file stays as written).
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import field, fields, is_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from logstore_cli.errors import ConfigError, InvalidInputError
from logstore_cli.model import (
    FrozenMap,
    FrozenRecord,
    frozen_record,
    is_secret_key,
    is_secret_value,
)

# librdkafka's socket.timeout.ms allows at most 300000: a longer Kafka timeout cannot be honoured.
MAX_KAFKA_TIMEOUT_S = 300.0


def _frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    # FrozenMap: a Config's repr (a debug line, a test's failure report) shows no secret value.
    return FrozenMap(mapping or {})


# Frozen records (model.FrozenRecord): a frozen dataclass's behaviour without compiling its
# methods at every start-up.
@frozen_record
class KafkaConfig(FrozenRecord):
    """The ``[kafka]`` section: default brokers, client properties, timeouts."""

    # None: the DDL's own address, else the local broker started by 'logstore broker start'.
    bootstrap_servers: str | None = None
    # librdkafka client properties applied to every table's client (DDL passthrough keys win).
    client: Mapping[str, str] = field(default_factory=_frozen)
    timeout_s: float = 10.0

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        client: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        _set = object.__setattr__
        _set(self, "bootstrap_servers", bootstrap_servers)
        _set(self, "client", _frozen() if client is None else client)
        _set(self, "timeout_s", timeout_s)


@frozen_record
class PulsarConfig(FrozenRecord):
    """The ``[pulsar]`` section: where Pulsar's admin REST API is (issue 23)."""

    # None: the local standalone's ('logstore pulsar start') for its service URL, else
    # http://<first host of log-store.address>:8080 (Pulsar's default web port).
    admin_url: str | None = None

    def __init__(self, admin_url: str | None = None) -> None:
        object.__setattr__(self, "admin_url", admin_url)


@frozen_record
class SparkConfig(FrozenRecord):
    """The ``[spark]`` section: the master and Spark properties."""

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=_frozen)

    def __init__(self, master: str = "local[*]", conf: Mapping[str, str] | None = None) -> None:
        object.__setattr__(self, "master", master)
        object.__setattr__(self, "conf", _frozen() if conf is None else conf)


@frozen_record
class Config(FrozenRecord):
    """The resolved configuration (file, environment and flags)."""

    warehouse: str = "./warehouse"
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: str | None = None  # the file it was read from, for messages

    def __init__(
        self,
        warehouse: str = "./warehouse",
        kafka: KafkaConfig | None = None,
        pulsar: PulsarConfig | None = None,
        spark: SparkConfig | None = None,
        source: str | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "warehouse", warehouse)
        _set(self, "kafka", KafkaConfig() if kafka is None else kafka)
        _set(self, "pulsar", PulsarConfig() if pulsar is None else pulsar)
        _set(self, "spark", SparkConfig() if spark is None else spark)
        _set(self, "source", source)

    @property
    def remote_warehouse(self) -> bool:
        """Whether the warehouse is remote (``s3://``, ``hdfs://``), not a local directory."""
        return is_remote_warehouse(self.warehouse)

    @property
    def s3_warehouse(self) -> bool:
        """Whether the warehouse is on S3 (Spark then needs the s3a:// jars and settings)."""
        return self.warehouse.startswith("s3://")

    def warehouse_path(self, cwd: Path | None = None) -> Path:
        """The local warehouse directory (a remote one is ``warehouse``, opened by the seam)."""
        path = Path(local_path(self.warehouse, "the warehouse", error=ConfigError)).expanduser()
        return path if path.is_absolute() else (cwd or Path.cwd()) / path


# "s3a://b/p", "hdfs:/p", "file:/p": a scheme of two characters or more, a colon and a slash.
_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+):(?P<rest>/.*)", re.DOTALL)
STORAGE_DOC = "docs/cluster.md, section 5 (The warehouse's storage)"


def local_path(text: str, what: str, *, error: type[InvalidInputError] = InvalidInputError) -> str:
    """``text`` as a local file system path; a URI is refused, naming ``what`` it was given for.

    Spark would read ``s3a://…`` as a URI but the lease, the writer id and delta-rs as the relative
    directory ``./s3a:/…``: the two would split the table. ``file:`` URIs without a host
    (``file:///data/wh``, Hadoop's ``file:/data/wh``, ``file://localhost/…``) are their path.
    """
    found = _URI.fullmatch(text.strip())
    if found is None:
        return text
    scheme, rest = found.group("scheme").lower(), found.group("rest")
    if scheme == "file":
        host, path = "", rest
        if rest.startswith("//"):
            host, _, tail = rest[2:].partition("/")
            path = "/" + tail
        if host in ("", "localhost") and not path.startswith("//"):
            from urllib.parse import unquote

            return unquote(path)
    raise error(
        f"{what} is given as the URI '{_without_userinfo(text.strip())}': object storage and "
        "remote file systems (s3a://, abfss://, gs://, hdfs://, file: with a host) are not "
        "supported for the warehouse, its tables or checkpoints today",
        hint="give a local path, or the path where the storage is mounted as a POSIX file "
        f"system on every host (file:///abs/path is read as /abs/path); see {STORAGE_DOC}",
    )


def _without_userinfo(uri: str) -> str:
    """``uri`` without ``user:password@`` (old Hadoop connectors took credentials there); ABFS's
    ``container@account`` has no colon and stays."""
    return re.sub(r"^([^:/]+://)[^/@:]*:[^/@]*@", r"\1***@", uri)


DEFAULTS = Config()
CONFIG_ENV = "LOGSTORE_CONFIG"
# The user guide's settings table (docs/guide.md, ``markdown_table``) sits between these markers.
README_BEGIN = "<!-- config:begin -->"
README_END = "<!-- config:end -->"


class Uses(enum.Enum):
    """What a command does with the configuration; it takes the flags of the groups it names."""

    WAREHOUSE = "warehouse"  # reads or writes tables
    BROKERS = "brokers"  # needs a default broker address (also to build a table's model)
    KAFKA = "kafka"  # talks to Kafka
    SPARK = "spark"  # may start Spark


class _Invalid(Exception):
    """A value a converter rejects: what would be valid, and what was given when not its repr."""

    def __init__(self, valid: str, got: str | None = None) -> None:
        super().__init__(valid)
        self.valid = valid
        self.got = got


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a non-empty string")
    return value.strip()


def remote_kind(text: str) -> str:
    """How a message names the remote warehouse ``text`` ("an s3://", "an hdfs://"). Pure."""
    return "an hdfs://" if text.startswith("hdfs://") else "an s3://"


def is_remote_warehouse(text: str) -> bool:
    """Whether a resolved ``warehouse`` value is remote (``s3://``, ``hdfs://``). Pure."""
    return text.startswith(("s3://", "hdfs://"))


def _warehouse(value: object) -> str:
    """A local directory as given, or ``s3://bucket/prefix`` or ``hdfs://namenode:port/path``
    checked and written canonically (``s3a://`` is the same store). Credentials come from the
    standard AWS variables or a profile, never from the URI: one holding ``user:secret@`` is
    refused without echoing it."""
    text = _text(value)
    scheme = _URI.fullmatch(text)
    if scheme is not None and scheme.group("scheme").lower() in ("s3", "s3a", "hdfs"):
        from logstore_cli.storage.uri import parse_storage_uri

        form = "hdfs://namenode:port/path" if scheme.group("scheme").lower() == "hdfs" else (
            "s3://bucket/prefix"
        )  # fmt: skip
        try:
            return str(parse_storage_uri(text))
        except InvalidInputError as exc:
            raise _Invalid(
                f"{form} ({exc.message}; see {STORAGE_DOC})",
                repr(re.sub(r"^([^:/]+://)[^/]*@", r"\1***@", text)),
            ) from None
    try:
        return local_path(text, "the warehouse")
    except InvalidInputError as exc:
        raise _Invalid(
            "a local or mounted POSIX directory, s3://bucket/prefix or hdfs://namenode:port/path "
            f"(other object storage is not supported for the warehouse today; see {STORAGE_DOC})",
            repr(_without_userinfo(text)),
        ) from exc


def _admin_url(value: object) -> str:
    """``http(s)://host[:port]``: the admin API's root (no path, no credentials)."""
    text = _text(value)
    if not re.fullmatch(
        r"https?://[A-Za-z0-9._\-]+(:\d{1,5})?/?|https?://\[[0-9A-Fa-f:.]+\](:\d{1,5})?/?", text
    ):
        raise _Invalid(
            "an admin URL http://host:port or https://host:port (no path)",
            repr(_without_userinfo(text)),
        )
    return text.rstrip("/")


def _seconds(value: object) -> float:
    valid = f"a number of seconds, more than 0 and at most {MAX_KAFKA_TIMEOUT_S:g}"
    # bool is an int to Python; 'timeout_s = true' is a mistake, not one second.
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _Invalid(valid)
    try:
        number = float(value)
    except ValueError:
        raise _Invalid(valid) from None
    # 'not 0 < n' also catches nan, which every comparison rejects.
    if not math.isfinite(number) or not 0 < number <= MAX_KAFKA_TIMEOUT_S:
        raise _Invalid(valid)
    return number


def _table(value: object) -> Mapping[str, str]:
    """A TOML table of scalars, or the repeated ``KEY=VALUE`` strings of a flag.

    Errors name keys and kinds, never values: ``kafka.client`` holds passwords.
    """
    valid = "a table of key = value pairs (strings, numbers or booleans)"
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        valid = "KEY=VALUE"
        items = []
        for pair in map(str, value):
            key, sep, val = pair.partition("=")
            if not sep or not key.strip():
                secret = is_secret_key(pair) or is_secret_value(pair)
                raise _Invalid(valid, "a value without '='" if secret else repr(pair))
            items.append((key.strip(), val.strip()))
    else:
        raise _Invalid(valid, f"a {_kind(value)}")
    out: dict[str, str] = {}
    for key, val in items:
        if isinstance(val, bool):
            out[str(key)] = "true" if val else "false"
        elif isinstance(val, str | int | float):
            out[str(key)] = str(val)
        else:
            raise _Invalid(valid, f"a {_kind(val)} for '{key}'")
    return _frozen(out)


def _kind(value: object) -> str:
    """A value's TOML kind, for messages that must not show the value."""
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list | tuple):
        return "list"
    return {bool: "boolean", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )


class Setting(NamedTuple):
    """One configuration setting: where it can be given, how its value is checked, its help."""

    key: str  # the TOML key, dotted by table: "kafka.timeout_s" is timeout_s under [kafka]
    convert: Callable[[object], Any]  # raises _Invalid
    help: str
    group: Uses
    env: str | None = None
    # Variables "<env_prefix><KEY>" each set one key of a table setting (see ``client_env_key``).
    env_prefix: str | None = None
    flag: str | None = None
    metavar: str | None = None
    example: str = ""  # a valid flag value, for hints
    default_help: str | None = None  # describes a default of None (computed at run time)
    # A table value adds to the table, so '--conf k=v' keeps the file's other [spark.conf] keys.
    merge: bool = False

    @property
    def default(self) -> Any:
        return setting_value(DEFAULTS, self)

    @property
    def default_text(self) -> str | None:
        """The default as help shows it: from the code, or ``default_help`` for a computed one."""
        value = self.default
        if value is None:
            return self.default_help
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, Mapping):
            return ", ".join(f"{k}={v}" for k, v in value.items()) or None
        return str(value)

    @property
    def name(self) -> str:
        """The Python identifier of the setting (its key with dots as underscores)."""
        return self.key.replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "warehouse", _warehouse,
        "Warehouse directory, s3://bucket/prefix or hdfs://namenode:port/path: tables live at "
        "<warehouse>/<db>/<table>.",
        Uses.WAREHOUSE, env="LOGSTORE_WAREHOUSE", flag="--warehouse",
        metavar="<dir|s3://…|hdfs://…>",
        example="./warehouse",
    ),
    Setting(
        "kafka.bootstrap_servers", _text, "Kafka brokers for tables whose DDL names none.",
        Uses.BROKERS, env="LOGSTORE_KAFKA_BOOTSTRAP_SERVERS", flag="--bootstrap-servers",
        metavar="<host:port,…>", example="127.0.0.1:9092",
        default_help="the local broker (every node of a local cluster), when running",
    ),
    Setting(
        "kafka.timeout_s", _seconds,
        f"Seconds a Kafka call may take before it fails (at most {MAX_KAFKA_TIMEOUT_S:g}).",
        Uses.KAFKA, env="LOGSTORE_KAFKA_TIMEOUT", flag="--kafka-timeout", metavar="<seconds>",
        example="10",
    ),
    Setting(
        "kafka.client", _table,
        "Kafka client properties for every table (secrets go here, or in the environment: "
        "LOGSTORE_KAFKA_CLIENT_SASL_PASSWORD sets sasl.password).",
        Uses.KAFKA, env_prefix="LOGSTORE_KAFKA_CLIENT_",
    ),
    Setting(
        "pulsar.admin_url", _admin_url,
        "Pulsar admin REST API for tables with 'log-store.type' = 'pulsar'.",
        Uses.KAFKA, env="LOGSTORE_PULSAR_ADMIN_URL", flag="--pulsar-admin-url", metavar="<url>",
        example="http://127.0.0.1:8080",
        default_help="the local standalone's ('logstore pulsar start') for its service URL, "
        "else http://<first host of log-store.address>:8080",
    ),
    Setting(
        "spark.master", _text, "Spark master (local[*], spark://…, yarn, k8s://…).",
        Uses.SPARK, env="LOGSTORE_SPARK_MASTER", flag="--master", metavar="<url>",
        example="local[*]",
    ),
    Setting(
        "spark.conf", _table, "Extra Spark configuration KEY=VALUE (repeatable).", Uses.SPARK,
        flag="--conf", metavar="K=V", example="spark.driver.memory=2g", merge=True,
    ),
)  # fmt: skip
BY_KEY: Mapping[str, Setting] = MappingProxyType({s.key: s for s in SETTINGS})
# Environment variables and the config key each sets.
ENV_VARS: Mapping[str, str] = MappingProxyType({s.env: s.key for s in SETTINGS if s.env})
# Prefixes of variables that set one key of a table setting, and that setting's key.
ENV_PREFIXES: Mapping[str, str] = MappingProxyType(
    {s.env_prefix: s.key for s in SETTINGS if s.env_prefix}
)
# The rest of a variable's name: upper-case words joined by single underscores.
_ENV_WORDS = re.compile(r"[A-Z0-9]+(?:_[A-Z0-9]+)*")
# Client properties logstore resolves itself: the variable that sets each instead.
_ENV_RESERVED = {"bootstrap.servers": "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS"}
_SECTIONS = frozenset(s.key.split(".")[0] for s in SETTINGS if "." in s.key)


class Overrides(NamedTuple):
    """What the command line gave: ``--config`` and the setting flags, by config key.

    A flag that was not given is absent from ``flags``; its value is the raw text (a list of texts
    for a repeatable flag), checked by ``resolve`` like any other source.
    """

    config_path: Path | None = None
    flags: Mapping[str, object] = MappingProxyType({})  # shared, read-only


def load_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"config file not found: {path}",
            hint="pass an existing file with --config, or unset LOGSTORE_CONFIG",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # Windows editors may add a byte order mark
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: config file is not UTF-8 text (byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1]!r})",
            hint="TOML files are UTF-8: save the file as UTF-8",
        ) from None
    import tomllib  # here: most runs have no config file, and the parser is ~2 ms to import

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint="fix the syntax") from None


def resolve(
    file_data: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    *,
    source: str | None = None,
) -> Config:
    """Defaults < file < env < flags. Pure."""
    cfg = replace(_from_file(file_data or {}, source or "<config>"), source=source)
    for var, key in ENV_VARS.items():
        value = (env or {}).get(var)
        if value:  # an empty variable counts as unset, as in most tools
            cfg = _apply(
                cfg, BY_KEY[key], value, f"environment variable {var}", f"fix or unset {var}"
            )
    for prefix, key in ENV_PREFIXES.items():
        # Sorted: the same environment gives the same map (and the same first error).
        pairs = {
            client_env_key(var, prefix): value
            for var, value in sorted((env or {}).items())
            if var.startswith(prefix) and value
        }
        if pairs:  # merged over the file's table: the variable wins for its one key
            cfg = _with(cfg, key.split("."), _frozen({**setting_value(cfg, BY_KEY[key]), **pairs}))
    for flag_key, flag_value in (flags or {}).items():
        if flag_key not in BY_KEY or not BY_KEY[flag_key].flag:
            raise ValueError(f"no flag sets config key {flag_key!r}")  # a bug in the caller
        setting = BY_KEY[flag_key]
        hint = f"e.g. {setting.flag} {setting.example}"
        cfg = _apply(cfg, setting, flag_value, str(setting.flag), hint)
    return cfg


def client_env_key(var: str, prefix: str = "LOGSTORE_KAFKA_CLIENT_") -> str:
    """The property ``var`` sets: its name after ``prefix``, lower-cased, ``_`` read as ``.``.

    Kafka's and librdkafka's property names are lower-case words joined by dots, so the spelling is
    unambiguous; the few names with ``_`` or ``-`` (confluent-kafka's Python callbacks, Flink's
    connector options) are no client properties and cannot be set this way. The value is never
    part of a message.
    """
    rest = var[len(prefix) :]
    example = f"{prefix}SASL_PASSWORD sets sasl.password"
    if not _ENV_WORDS.fullmatch(rest):
        raise ConfigError(
            f"environment variable {var} does not name a Kafka client property",
            hint=f"write the property's name in upper case with '_' for '.' ({example}), or "
            f"unset {var}",
        )
    key = rest.lower().replace("_", ".")
    if key in _ENV_RESERVED:
        raise ConfigError(
            f"environment variable {var} would set the client property {key}, which logstore "
            "takes from the table's DDL or the config",
            hint=f"set {_ENV_RESERVED[key]} instead, and unset {var}",
        )
    return key


def load(
    config_path: Path | None, env: Mapping[str, str], flags: Mapping[str, object] | None = None
) -> Config:
    """Resolve the configuration: ``--config``, else ``LOGSTORE_CONFIG``, else defaults only."""
    path = config_path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    data = load_file(path) if path else {}
    return resolve(data, env, flags, source=str(path) if path else None)


def markdown_table() -> str:
    """The user guide's table of settings, from the declarations."""

    def code(text: str | None) -> str:
        return f"`{text}`" if text else ""

    def prose(text: str) -> str:  # help text is plain: keep '<dir>' and 'local[*]' literal
        return "".join(f"\\{c}" if c in "<>*_|[]" else c for c in text)

    def row(*cells: str) -> str:
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

    rows = [
        row("key", "env", "flag", "default", "meaning"),
        "|---|---|---|---|---|",
        row("(the file itself)", code(CONFIG_ENV), "`--config`", "none", "TOML config file"),
    ]
    for s in SETTINGS:
        key = code(s.key) + (" (table)" if isinstance(s.default, Mapping) else "")
        env = code(s.env) or (code(f"{s.env_prefix}<PROPERTY>") if s.env_prefix else "")
        flag = code(f"{s.flag} {s.metavar}" if s.merge else s.flag)
        default = prose(s.default_help or "") if s.default is None else code(s.default_text)
        rows.append(row(key, env, flag, default or "none", prose(s.help)))
    return "\n".join(rows)


def update_readme(readme: str) -> str:
    """``readme`` (docs/guide.md) with the text between the config markers replaced by
    ``markdown_table()``."""
    begin, end = readme.find(README_BEGIN), readme.find(README_END)
    if begin < 0 or end < begin:
        raise ValueError(f"the page needs the markers {README_BEGIN} and {README_END}, in order")
    return f"{readme[: begin + len(README_BEGIN)]}\n{markdown_table()}\n{readme[end:]}"


def _unknown(key: str, where: str) -> ConfigError:
    near = difflib.get_close_matches(key, list(BY_KEY), n=1)
    hint = f"did you mean '{near[0]}'?" if near else f"valid keys: {', '.join(BY_KEY)}"
    return ConfigError(f"{where}: unknown config key '{key}'", hint=hint)


def _from_file(data: Mapping[str, Any], where: str) -> Config:
    cfg = DEFAULTS
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"{where}: '{key}' must be a table ([{key}])",
                    hint=f"write its keys under a [{key}] header",
                )
            for sub, subval in value.items():
                cfg = _from_file_key(cfg, f"{key}.{sub}", subval, where)
        else:
            cfg = _from_file_key(cfg, key, value, where)
    return cfg


def _from_file_key(cfg: Config, key: str, value: object, where: str) -> Config:
    if key not in BY_KEY:
        raise _unknown(key, where)
    setting = BY_KEY[key]
    hint = f"fix '{key}' in {where}, or remove it to use the default"
    if setting.default_text:
        hint += f" ({setting.default_text})"
    return _apply(cfg, setting, value, f"{where}: '{key}'", hint)


def _apply(cfg: Config, setting: Setting, value: object, where: str, hint: str) -> Config:
    """``cfg`` with ``setting`` set to ``value``, checked; a bad value names ``where`` it came from."""
    try:
        converted = setting.convert(value)
    except _Invalid as bad:
        got = repr(value) if bad.got is None else bad.got
        raise ConfigError(f"{where} must be {bad.valid}, got {got}", hint=hint) from None
    if setting.merge:
        converted = _frozen({**setting_value(cfg, setting), **converted})
    updated: Config = _with(cfg, setting.key.split("."), converted)
    return updated


def setting_value(cfg: Config, setting: Setting) -> Any:
    value: Any = cfg
    for part in setting.key.split("."):
        value = getattr(value, part)
    return value


def _with(obj: Any, path: list[str], value: object) -> Any:
    """A copy of the nested frozen dataclass ``obj`` with the field at ``path`` set to ``value``."""
    head, *rest = path
    assert is_dataclass(obj) and head in {f.name for f in fields(obj)}, path
    return replace(obj, **{head: _with(getattr(obj, head), rest, value) if rest else value})  # type: ignore[type-var]
