"""docs/cluster.md shows only what exists: its commands parse, its config and DDL are valid.

Every ``logstore …`` command of the page's ``bash`` blocks (and every inline ``logstore …`` span)
is parsed by the real Typer/Click command tree, as the shell would split it: the subcommand, each
option and each typed value must exist and parse. Its ``toml`` blocks resolve as configuration
(their Kafka client properties translate for librdkafka), its ``sql`` blocks parse as DDL, and its
secrets example sets client properties from the environment.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main

from logstore_cli import config
from logstore_cli.cli.app import app
from logstore_cli.ddl import ParseOptions, parse_ddl
from logstore_cli.kafka.client_config import librdkafka_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"
TEXT = DOC.read_text(encoding="utf-8")
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_SEPARATORS = {";", "&&", "||", "|", "(", ")", "&"}
_REDIRECTS = {">", ">>", "<", "2>", "&>"}
_ELLIPSIS = "…"


def _blocks(language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(TEXT) if lang == language]


def _strip_comment(line: str) -> str:
    """``line`` without a shell comment: a ``#`` at the start or after a blank, outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _logical_lines(script: str) -> list[str]:
    """The script's commands: continuation lines joined, comments and here-document bodies dropped."""
    lines: list[str] = []
    pending = ""
    heredoc_end: str | None = None
    for raw in script.splitlines():
        if heredoc_end is not None:
            if raw.strip() == heredoc_end:
                heredoc_end = None
            continue
        line = _strip_comment(raw)
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        found = _HEREDOC.search(line)
        if found:
            heredoc_end = found.group(2)
        if line.strip():
            lines.append(line)
    assert not pending, f"a continuation line ends the block: {pending!r}"
    return lines


def _segments(line: str) -> list[list[str]]:
    """The simple commands of a shell line, as the shell would split their words."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    segments: list[list[str]] = [[]]
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in _SEPARATORS:
            segments.append([])
        elif token in _REDIRECTS or token.startswith("<<"):
            skip_next = True
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _commands() -> list[list[str]]:
    found = []
    for script in _blocks("bash"):
        for line in _logical_lines(script):
            found += [s[1:] for s in _segments(line) if s[0] == "logstore"]
    return found


def _inline_commands() -> list[list[str]]:
    spans = re.findall(r"`(logstore [^`]+)`", TEXT)
    return [shlex.split(" ".join(span.split()))[1:] for span in spans]


def _parse(words: list[str], *, resilient: bool = False, group: bool = False) -> Any:
    """The Click context of the command ``logstore <words>`` names; raises on what does not parse.
    ``group``: the words may name a command group alone (``logstore spark``), which is returned."""
    command: Any = typer.main.get_command(app)
    name, args, parent = "logstore", list(words), None
    while True:
        if group and not args and hasattr(command, "commands"):
            return command
        ctx = command.make_context(name, args, parent=parent, resilient_parsing=resilient)
        if not hasattr(command, "commands"):  # a leaf: every option and value parsed
            return ctx
        rest = [*ctx._protected_args, *ctx.args]
        assert rest, f"'logstore {' '.join(words)}' names no subcommand"
        name, command, args = command.resolve_command(ctx, rest)
        parent = ctx


def test_the_page_shows_commands_config_and_ddl() -> None:
    commands = _commands()
    assert len(commands) >= 20
    shown = {tuple(c[:2]) for c in commands}
    # The sections the page must cover, by the commands they show.
    for expected in [("broker", "start"), ("spark", "start"), ("ingest", "shop.orders")]:
        assert expected in shown
    assert any("--print-spark-submit" in c for c in commands)
    assert sum("--master" in c for c in commands) >= 4  # local, standalone, YARN, Kubernetes
    assert _blocks("toml") and _blocks("sql")


@pytest.mark.parametrize("words", _commands(), ids=lambda w: " ".join(w)[:80])
def test_every_command_of_the_page_parses(words: list[str]) -> None:
    assert "--help" not in words  # --help exits before anything is checked
    _parse(words)


@pytest.mark.parametrize("words", _inline_commands(), ids=lambda w: " ".join(w)[:80])
def test_every_inline_command_names_real_subcommands_and_options(words: list[str]) -> None:
    # "logstore ingest … --master URL": the elided part may hold required options.
    elided = _ELLIPSIS in words
    _parse([w for w in words if w != _ELLIPSIS], resilient=elided, group=True)


def test_a_misspelt_option_would_be_caught() -> None:
    with pytest.raises(Exception, match="No such option"):
        _parse(["broker", "start", "--brokerz", "3"])
    with pytest.raises(Exception, match="No such command"):
        _parse(["spark", "launch"])


@pytest.mark.parametrize("block", _blocks("toml"), ids=lambda b: b.splitlines()[0][:40])
def test_every_config_example_resolves_and_its_client_properties_translate(block: str) -> None:
    cfg = config.resolve(tomllib.loads(block), {}, {}, source="docs/cluster.md")
    conf, ignored = librdkafka_config("b-1:9096", cfg.kafka.client)
    if "sasl.jaas.config" in cfg.kafka.client:
        assert conf["sasl.username"] and conf["sasl.password"]  # the JAAS line was understood
    # The Java-only TLS keys are meant for a kafka: source; librdkafka drops exactly those.
    assert all(k.startswith("ssl.truststore.") for k in ignored)


@pytest.mark.parametrize("block", _blocks("sql"), ids=lambda b: b.split("(")[0].strip()[:40])
def test_every_ddl_example_parses(block: str) -> None:
    # A table without brokers of its own takes the running local cluster's (as the page says).
    options = ParseOptions(default_bootstrap_servers="127.0.0.1:9092")
    tables = parse_ddl(block, "docs/cluster.md", options)
    assert tables and all(t.log_store is not None for t in tables)
    assert all(t.log_store.replication == 3 for t in tables if t.log_store)


def test_the_secrets_example_sets_client_properties_from_the_environment() -> None:
    scripts = [b for b in _blocks("bash") if "LOGSTORE_KAFKA_CLIENT_" in b]
    assert len(scripts) == 1
    names = re.findall(r"^export (LOGSTORE_KAFKA_CLIENT_\w+)=", scripts[0], re.MULTILINE)
    password = "p\"a\\ss wörd\t$x'`"
    cfg = config.resolve({}, {name: password for name in names}, {}, source="environment")
    assert cfg.kafka.client == {"sasl.username": password, "sasl.password": password}
    assert "LOGSTORE_KAFKA_CLIENT_SASL_JAAS_CONFIG" in TEXT  # the kafka: source's spelling
    assert config.client_env_key("LOGSTORE_KAFKA_CLIENT_SASL_JAAS_CONFIG") == "sasl.jaas.config"
