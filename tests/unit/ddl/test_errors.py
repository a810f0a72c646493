"""Errors: message, line and column of every case ``validate`` must catch, and their rendering."""

from __future__ import annotations

import pytest

from logstore_cli.ddl import ParseOptions, parse_ddl, parse_document
from logstore_cli.errors import DDLError, Diagnostic

pytestmark = pytest.mark.unit

GOOD_PROPS = "'log-store.enabled' = 'true', 'log-store.topic' = 't', 'log-store.address' = 'h:9092'"


def errors(
    text: str, options: ParseOptions | None = None
) -> list[tuple[int | None, int | None, str]]:
    with pytest.raises(DDLError) as info:
        parse_ddl(text, "t.sql", options)
    return [(d.line, d.col, d.message) for d in info.value.errors]


def only_error(
    text: str, options: ParseOptions | None = None
) -> tuple[int | None, int | None, str]:
    found = errors(text, options)
    assert len(found) == 1, found
    return found[0]


# -- syntax --------------------------------------------------------------------------------------


def test_syntax_error_points_at_the_token() -> None:
    text = "CREATE TABLE t (\n  id INT\n  name STRING\n);"
    assert only_error(text) == (
        3,
        3,
        "expected ',' or ')' after the column definition, found 'name'",
    )


def test_missing_type() -> None:
    assert only_error("CREATE TABLE t (id, x INT);") == (
        1,
        19,
        "expected a type for column 'id', found ','",
    )


def test_unterminated_string() -> None:
    text = "CREATE TABLE t (id INT) WITH (\n  'k' = 'v);\n"
    assert only_error(text) == (2, 9, "unterminated string: ' has no closing '")


def test_unterminated_comment() -> None:
    assert only_error("CREATE TABLE t (id INT); /* no end") == (
        1,
        26,
        "unterminated comment: '/*' has no closing '*/'",
    )


def test_end_of_input() -> None:
    assert only_error("CREATE TABLE t (id INT") == (
        1,
        23,
        "expected ',' or ')' after the column definition, found the end of the input",
    )


def test_semicolon_reported_as_such() -> None:
    assert only_error("CREATE TABLE t (id INT;")[2].endswith("found ';'")


def test_missing_comma_between_properties() -> None:
    line, col, message = only_error("CREATE TABLE t (a INT) WITH ('a' = 'b' 'c' = 'd');")
    assert (line, col) == (1, 40)
    assert message == "expected ',' or ')' after the property, found a string"


def test_misspelt_statement_suggests_create() -> None:
    assert only_error("CRATE TABLE t (a INT);") == (
        1,
        1,
        "unknown statement 'CRATE'; did you mean 'CREATE'?",
    )


def test_missing_semicolon_between_statements_still_parses_both() -> None:
    text = "CREATE TABLE a (x INT)\nCREATE TABLE b (y FOO);"
    assert errors(text) == [
        (2, 1, "missing ';' before this statement"),
        (2, 19, "unknown type 'FOO'"),
    ]


def test_unknown_type_suggests() -> None:
    assert only_error("CREATE TABLE t (a BIGINTT);") == (
        1,
        19,
        "unknown type 'BIGINTT'; did you mean BIGINT?",
    )


def test_unsupported_type() -> None:
    line, col, message = only_error("CREATE TABLE t (a TIME(3));")
    assert (line, col) == (1, 19) and message.startswith("unsupported type TIME")


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("a DECIMAL(39, 2)", "DECIMAL precision must be between 1 and 38, not 39"),
        ("a DECIMAL(5, 6)", "DECIMAL scale must be between 0 and the precision (5), not 6"),
        ("a INT(3)", "type INT takes no arguments"),
        ("a TIMESTAMP(12)", "TIMESTAMP precision must be between 0 and 9, not 12"),
        ("a VARCHAR(0)", "VARCHAR length must be at least 1, not 0"),
    ],
)
def test_type_arguments(ddl: str, message: str) -> None:
    assert only_error(f"CREATE TABLE t ({ddl});") == (1, 19, message)


def test_ctas_is_rejected() -> None:
    assert only_error("CREATE TABLE t USING delta AS SELECT 1;") == (
        1,
        28,
        "CREATE TABLE … AS SELECT is not supported: list the columns instead",
    )


def test_computed_and_metadata_columns_are_reported() -> None:
    found = errors("CREATE TABLE t (a INT, b AS a + 1, c STRING METADATA FROM 'x', d INT);")
    assert [(c, m.split(" (")[0]) for _, c, m in found] == [
        (24, "computed columns"),
        (45, "metadata columns"),
    ]


# -- columns and keys ------------------------------------------------------------------------------


def test_duplicate_columns_case_insensitive() -> None:
    assert only_error("CREATE TABLE t (\n  id INT,\n  ID BIGINT\n);") == (
        3,
        3,
        "duplicate column 'ID'",
    )


def test_primary_key_column_must_exist() -> None:
    text = "CREATE TABLE t (id INT, name STRING, PRIMARY KEY (idx) NOT ENFORCED);"
    assert only_error(text) == (
        1,
        51,
        "primary key column 'idx' is not a column of the table (columns: id, name)",
    )


def test_two_primary_keys() -> None:
    line, col, message = only_error("CREATE TABLE t (id INT PRIMARY KEY, PRIMARY KEY (id));")
    assert (line, col) == (1, 37) and message.startswith("more than one PRIMARY KEY")


def test_partition_column_must_exist() -> None:
    assert only_error("CREATE TABLE t (id INT) PARTITIONED BY (dt);")[2].startswith(
        "partition column 'dt' is not a column"
    )


def test_elided_column_list_is_an_error() -> None:
    assert only_error("CREATE TABLE T (...) WITH ('k' = 'v');") == (
        1,
        17,
        "the column list is elided ('...'), as in documentation; write out the columns, "
        "e.g. (id BIGINT, name STRING, PRIMARY KEY (id))",
    )


def test_unicode_ellipsis_is_elided_too() -> None:
    assert only_error("CREATE TABLE T (…);")[2].startswith("the column list is elided")


def test_table_declared_twice() -> None:
    text = "CREATE TABLE db.t (a INT);\nCREATE TABLE DB.T (a INT);"
    assert only_error(text) == (2, 14, "table db.t is declared twice (first on line 1)")


def test_table_declared_twice_under_other_names_of_the_same_place() -> None:
    text = "CREATE TABLE t (a INT);\nCREATE TABLE cat.`default`.T (a INT);"
    assert only_error(text) == (2, 14, "table default.t is declared twice (first on line 1)")


# -- properties ------------------------------------------------------------------------------------


def test_unknown_reserved_key_suggests_nearest() -> None:
    text = f"CREATE TABLE t (a INT) WITH (\n  {GOOD_PROPS},\n  'log-store.topik' = 'x'\n);"
    assert only_error(text) == (
        3,
        3,
        "unknown property 'log-store.topik'; did you mean 'log-store.topic'?",
    )


@pytest.mark.parametrize(
    "key", ["log.sytem", "mixed-format.read.mod", "arctic.read.mode.x", "LOG-STORE.ENABLED"]
)
def test_reserved_prefixes(key: str) -> None:
    message = only_error(f"CREATE TABLE t (a INT) WITH ('{key}' = 'x');")[2]
    assert message.startswith(f"unknown property '{key}'") and "did you mean" in message


def test_unknown_reserved_key_without_suggestion() -> None:
    message = only_error("CREATE TABLE t (a INT) WITH ('mixed-format.zzzzzzzzzz' = 'x');")[2]
    assert message == (
        "unknown property 'mixed-format.zzzzzzzzzz'; keys under 'mixed-format.' are reserved; "
        "'logstore properties' lists them"
    )


def test_keys_outside_reserved_prefixes_are_kept() -> None:
    (t,) = parse_ddl(
        "CREATE TABLE t (a INT) WITH ('delta.x' = '1', 'write.upsert.enabled' = 'true', 'anything' = 'goes');"
    )
    assert dict(t.properties) == {
        "delta.x": "1",
        "write.upsert.enabled": "true",
        "anything": "goes",
    }


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("scan.startup.mod", "scan.startup.mode"),
        ("scan.mod", "scan.mode"),
        ("log-stor.enabled", "log-store.enabled"),
        ("logstore.topic", "log-store.topic"),
        ("mixed-fromat.read.mode", "mixed-format.read.mode"),
        ("streaming-read.mode", "streaming-read-mode"),
        ("kafka.topics", "kafka.topic"),
        ("kafka.bootstrap.server", "kafka.bootstrap.servers"),
        ("kafka.bootstrap_servers", "kafka.bootstrap.servers"),
    ],
)
def test_near_miss_of_a_known_key_is_an_error_anywhere(key: str, meant: str) -> None:
    text = f"CREATE TABLE t (a INT) WITH (\n  '{key}' = 'x'\n);"
    with pytest.raises(DDLError) as info:
        parse_ddl(text, "t.sql")
    (d,) = info.value.errors
    assert (d.line, d.col, d.end_col) == (2, 3, 3 + len(key) + 2)  # the quoted key
    assert d.message == f"unknown property '{key}'; did you mean '{meant}'?"


def test_misspelt_reserved_prefix_is_an_error() -> None:
    assert only_error("CREATE TABLE t (a INT) WITH ('log-stor.anything' = 'x');") == (
        1,
        30,
        "unknown property 'log-stor.anything': 'log-stor.' looks like a misspelling of the "
        "prefix 'log-store.', whose keys 'logstore properties' lists",
    )


@pytest.mark.parametrize(
    "key",
    [
        "kafka.client.id",
        "kafka.transactional.id",
        "kafka.group.id",
        "kafka.acks",
        "kafka.topic.metadata.refresh.interval.ms",
        "kafka.Security.protocol",  # client keys are the client's to judge
        "properties.group.id",
        "properties.topic",
        "properties.bootstrap.servers",
        "properties.sasl.mechanism",
        "scan.startup.specific-offsets",
        "scan.bounded.mode",
        "scan.bounded.timestamp-millis",
        "scan.topic-partition-discovery.interval",
        "scan.timestamp",
        "scan.snapshot-id",
        "topic",
        "format",
        "key.format",
        "streaming-read-overwrite",
        "logs.retention",
        "lag.ms",
        "log_level",
        "delta.dataSkippingStatsColumns",
        "write.upsert.enabled",
    ],
)
def test_other_keys_near_known_prefixes_are_kept(key: str) -> None:
    props = "'log.system' = 'kafka', 'kafka.topic' = 't', 'kafka.bootstrap.servers' = 'h:1'"
    # 'h:1' for all: properties.bootstrap.servers must agree with the address
    (table,) = parse_ddl(f"CREATE TABLE t (a INT) WITH ({props}, '{key}' = 'h:1');")
    assert table.properties[key] == "h:1"


def test_java_client_keys_are_never_near_misses() -> None:
    from logstore_cli.kafka.client_config import JAVA_ONLY_KEYS

    for name in JAVA_ONLY_KEYS:
        for prefix in ("kafka.", "properties."):
            (table,) = parse_ddl(f"CREATE TABLE t (a INT) WITH ('{prefix}{name}' = '1');")
            assert f"{prefix}{name}" in table.properties


def test_misspelt_secret_client_key_is_a_warning_and_stays_secret() -> None:
    text = (
        "CREATE TABLE t (a INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 't',\n"
        "  'kafka.bootstrap.servers' = 'h:1', 'properties.sasl.jass.config' = 'hunter2');"
    )
    result = parse_document(text, "t.sql")
    (warning,) = result.diagnostics
    assert (warning.severity, warning.line, warning.col) == ("warning", 2, 38)
    assert warning.message.startswith(
        "'properties.sasl.jass.config' looks like a misspelling of 'properties.sasl.jaas.config'"
    )
    assert "hunter2" not in warning.render() and "*********" in warning.render()
    (table,) = result.tables
    assert "hunter2" not in str(table.to_json()) and "hunter2" not in repr(table)
    assert table.log_store is not None
    assert table.log_store.client_properties["sasl.jass.config"] == "hunter2"  # raw for the client


def test_bad_boolean_lists_valid_values() -> None:
    assert only_error("CREATE TABLE t (a INT) WITH ('log-store.enabled' = 'yes');") == (
        1,
        52,
        "invalid value 'yes' for 'log-store.enabled'; valid values: true, false",
    )


def test_bad_enum_lists_valid_values() -> None:
    text = f"CREATE TABLE t (a INT) WITH ({GOOD_PROPS}, 'log.consistency' = 'strong');"
    assert (
        only_error(text)[2]
        == "invalid value 'strong' for 'log.consistency'; valid values: transactional, eventual"
    )


def test_unsupported_log_system_type() -> None:
    # Paimon's log is Kafka only; Pulsar is Amoro's log-store.type (tests/unit/ddl/test_pulsar_ddl.py)
    text = "CREATE TABLE t (a INT) WITH ('log.system' = 'pulsar', 'kafka.topic' = 't');"
    assert only_error(text)[2] == (
        "'log.system' = 'pulsar' is not supported by logstore; valid values: none, kafka; for a "
        "Pulsar log write Amoro's 'log-store.enabled' = 'true' and 'log-store.type' = 'pulsar'"
    )


def test_bad_integer() -> None:
    text = f"CREATE TABLE t (a INT) WITH ({GOOD_PROPS}, 'log.system.partitions' = '0');"
    assert (
        only_error(text)[2]
        == "invalid value '0' for 'log.system.partitions': expected a whole number ≥ 1"
    )


def test_duplicate_property() -> None:
    text = "CREATE TABLE t (a INT) WITH ('k' = '1',\n 'k' = '2');"
    assert only_error(text) == (2, 2, "duplicate property 'k'")


def test_log_store_without_topic() -> None:
    text = "CREATE TABLE t (a INT) TBLPROPERTIES (\n  'log-store.enabled' = 'true',\n  'log-store.address' = 'h:9092'\n);"
    assert only_error(text) == (
        2,
        3,
        "the log store is on ('log-store.enabled') but no topic is set; add 'log-store.topic' = "
        "'<topic>' (the topic has no default)",
    )


def test_log_store_without_address_says_how_to_fix() -> None:
    text = "CREATE TABLE t (a INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 't');"
    assert only_error(text) == (
        1,
        30,
        "the log store is on ('log.system') but no Kafka broker address is set; add "
        "'kafka.bootstrap.servers' = 'host:9092', or give a default: --bootstrap-servers, "
        "LOGSTORE_KAFKA_BOOTSTRAP_SERVERS, the config's kafka.bootstrap_servers, or a running "
        "'logstore broker start'",
    )


def test_default_broker_address_fills_the_gap() -> None:
    text = "CREATE TABLE t (a INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 't');"
    (t,) = parse_ddl(text, options=ParseOptions(default_bootstrap_servers="b1:9092"))
    assert t.log_store is not None and t.log_store.address == "b1:9092"


def test_invalid_default_broker_address() -> None:
    text = "CREATE TABLE t (a INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 't');"
    message = only_error(text, ParseOptions(default_bootstrap_servers="nonsense"))[2]
    assert message.startswith(
        "invalid Kafka broker address 'nonsense' in the default broker address"
    )


def test_invalid_broker_and_topic() -> None:
    text = "CREATE TABLE t (a INT) WITH ('log-store.enabled' = 'true', 'log-store.address' = 'h:99999', 'log-store.topic' = 'a b');"
    found = errors(text)
    assert [m.split(" in ")[0] for _, _, m in found] == [
        "invalid Kafka broker address 'h:99999'",
        "invalid Kafka topic name 'a b'",
    ]


def test_consistency_vocabularies_must_agree() -> None:
    text = (
        "CREATE TABLE t (a INT) WITH (\n"
        f"  {GOOD_PROPS},\n"
        "  'log.consistency' = 'transactional',\n"
        "  'log-store.consistency-guarantee.enabled' = 'true'\n);"
    )
    assert only_error(text) == (
        4,
        47,
        "'log-store.consistency-guarantee.enabled' = 'true' (eventual) contradicts "
        "'log.consistency' = 'transactional' (committed); remove one or make them agree",
    )


def test_on_off_vocabularies_must_agree() -> None:
    text = "CREATE TABLE t (a INT) WITH ('log.system' = 'none', 'log-store.enabled' = 'true');"
    assert "(on) contradicts 'log.system' = 'none' (off)" in only_error(text)[2]


def test_upsert_needs_a_primary_key() -> None:
    text = f"CREATE TABLE t (a INT) WITH ({GOOD_PROPS}, 'log.changelog-mode' = 'upsert');"
    assert only_error(text)[2] == "'log.changelog-mode' = 'upsert' needs a primary key"


def test_timestamp_start_needs_a_timestamp() -> None:
    text = f"CREATE TABLE t (a INT) WITH ({GOOD_PROPS}, 'scan.startup.mode' = 'timestamp');"
    assert (
        only_error(text)[2]
        == "'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis'"
    )


def test_log_reads_need_the_log_store() -> None:
    text = "CREATE TABLE t (a INT) WITH ('mixed-format.read.mode' = 'log');"
    assert only_error(text)[2].startswith("'mixed-format.read.mode' = 'log' needs the log store")


def test_alias_and_key_must_agree() -> None:
    text = "CREATE TABLE t (a INT) WITH ('arctic.read.mode' = 'file', 'mixed-format.read.mode' = 'log');"
    assert only_error(text)[2].startswith(
        "'mixed-format.read.mode' = 'log' contradicts 'arctic.read.mode'"
    )


def test_passthrough_prefixes_must_agree() -> None:
    text = f"CREATE TABLE t (a INT) WITH ({GOOD_PROPS}, 'properties.acks' = 'all', 'kafka.acks' = '1');"
    assert (
        only_error(text)[2]
        == "'kafka.acks' and 'properties.acks' set the Kafka client setting 'acks' to different values"
    )


def test_settings_while_off_are_warnings() -> None:
    result = parse_document("CREATE TABLE t (a INT) WITH ('log-store.topic' = 't');")
    assert not result.errors and len(result.tables) == 1
    assert [(d.col, d.message.split(":")[0]) for d in result.warnings] == [
        (30, "'log-store.topic' has no effect")
    ]


# -- several errors, rendering, secrets -------------------------------------------------------------


def test_several_errors_in_one_run_in_source_order() -> None:
    text = (
        "CREATE TABLE a (x INT, x INT);\n"
        "CREATE TABLE b (y INT) WITH ('log.system' = 'kafkaa');\n"
        "CREATE TABLE c (z INT,);\n"
    )
    assert [(line, col) for line, col, _ in errors(text)] == [(1, 24), (2, 45), (3, 23)]


def test_rendering_is_file_line_col_with_caret() -> None:
    with pytest.raises(DDLError) as info:
        parse_ddl("CREATE TABLE t (a INT) WITH (\n\t'log-store.enabled' = 'yes');", "my.sql")
    (d,) = info.value.errors
    assert d.render() == (
        "my.sql:2:24: error: invalid value 'yes' for 'log-store.enabled'; valid values: true, false\n"
        "\t'log-store.enabled' = 'yes');\n"
        "\t                      ^~~~~"
    )
    assert str(info.value) == d.headline


def test_position_free_diagnostic_renders_without_location() -> None:
    assert Diagnostic("boom", file="db.t").render() == "db.t: error: boom"
    assert Diagnostic("boom").render() == "error: boom"


def test_no_create_table_is_an_error() -> None:
    result = parse_document("-- nothing here\nSELECT 1;", "x.sql")
    assert [(d.severity, d.line, d.message) for d in result.diagnostics] == [
        ("warning", 2, "skipped this SELECT statement: only CREATE TABLE statements are validated"),
        ("error", None, "no CREATE TABLE statement found"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "CREATE TABLE t (a INT) WITH ('properties.sasl.jaas.config' = 'PlainLoginModule password=\"hunter2\";', 'log-store.enabled' = 'yes');",
        "CREATE TABLE t (a INT) WITH ('kafka.ssl.key.password' = 'hunter2' 'log.system' = 'kafka');",
        "CREATE TABLE t (a INT) WITH ('kafka.ssl.truststore.password' = hunter2);",
        "CREATE TABLE t (a INT) WITH (sasl.jaas.config = 'hunter2', x);",
        "CREATE TABLE t (a INT) WITH ('properties.sasl.password' = 'hunter2);",
        "CREATE TABLE t (a INT) WITH ('my.conn' = 'user=u password=hunter2', 'log.sytem' = 'x');",
    ],
)
def test_secrets_never_shown(text: str) -> None:
    with pytest.raises(DDLError) as info:
        parse_ddl(text)
    shown = "\n".join(d.render() for d in info.value.diagnostics) + str(info.value)
    assert "hunter2" not in shown
    assert "*******" in shown  # the value is starred out in the excerpt, same length


def test_a_default_broker_lookup_runs_only_for_a_table_without_an_address() -> None:
    asked: list[int] = []

    def lookup() -> str | None:
        asked.append(1)
        return "b2:9092"

    options = ParseOptions(default_bootstrap_servers=lookup)
    own = "CREATE TABLE a (x INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 'a', "
    own += "'kafka.bootstrap.servers' = 'b1:9')"
    (t,) = parse_ddl(own, options=options)
    assert t.log_store is not None and t.log_store.address == "b1:9" and not asked
    other = "CREATE TABLE b (x INT) WITH ('log.system' = 'kafka', 'kafka.topic' = 'b')"
    (t,) = parse_ddl(other, options=options)
    assert t.log_store is not None and t.log_store.address == "b2:9092" and asked == [1]
