"""Pulsar topic administration through the admin REST API (issue 23), the Pulsar counterpart of
``kafka/admin.py``: create, describe, grow and delete a partitioned topic, its retention, and the
last message id of each partition (where an epoch's records end, design §7.1).

Plain HTTP with the standard library: the admin API is REST, and the commands that only
administer topics should not load the Pulsar client's native library. Every call ends within its
deadline (``timeout_s``, one per public call, shared by its requests); Pulsar's answers become
domain errors (``logstore_cli.errors``); a token (``auth_token``) is sent as a bearer header and
never appears in a message.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logstore_cli.errors import (
    BrokerError,
    InvalidInputError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    TopicExistsError,
    TopicNotFoundError,
)
from logstore_cli.logformat.pulsar_form import ordinal
from logstore_cli.names import PULSAR_PARTITION_SUFFIX
from logstore_cli.names import PulsarTopicName as TopicName

__all__ = ["MessagePosition", "PulsarAdmin", "PulsarTopic", "TopicName"]

_PARTITION_SUFFIX = PULSAR_PARTITION_SUFFIX


DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # broker.conf maxMessageSize


@dataclass(frozen=True, order=True)
class MessagePosition:
    """A message's place in one partition: Pulsar's ``MessageId`` without the partition. Ordered
    (ledger, then entry, then batch index) but not dense: compare positions, never subtract them."""

    ledger: int
    entry: int
    batch: int = -1

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}:{self.batch}"

    @classmethod
    def parse(cls, text: str) -> MessagePosition:
        """``"<ledger>:<entry>:<batch>"`` as ``str`` writes it (Delta commit metadata, §7.1)."""
        parts = text.split(":")
        if len(parts) != 3 or not all(re.fullmatch(r"-?[0-9]{1,19}", p) for p in parts):
            raise ValueError(
                f"not a Pulsar message position ('<ledger>:<entry>:<batch>'): {text!r}"
            )
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    def after(self) -> int:
        """The read engine's position just after this message (``pulsar_form.ordinal`` + 1, odd):
        where a read that has read it goes on."""
        return ordinal(self.ledger, self.entry, self.batch) + 1


@dataclass(frozen=True)
class PulsarTopic:
    """A partitioned topic as the admin API describes it."""

    name: str
    partitions: int
    retention_minutes: int | None  # the topic's own policy (-1: infinite); None: none set
    retention_mb: int | None


class PulsarAdmin:
    """The admin API at ``web_url`` (``http://host:port``)."""

    def __init__(self, web_url: str, *, timeout_s: float = 30.0, auth_token: str | None = None):
        parsed = urllib.parse.urlsplit(web_url)
        if (
            parsed.scheme not in ("http", "https")
            or not parsed.hostname
            or parsed.path
            not in (
                "",
                "/",
            )
        ):
            raise InvalidInputError(
                f"invalid Pulsar admin URL {web_url!r}",
                hint="http://host:port or https://host:port",
            )
        self.web_url = f"{parsed.scheme}://{parsed.netloc}"
        self.timeout_s = timeout_s
        self._token = auth_token

    def ping(self) -> None:
        """Raise BrokerError unless the admin API answers (the clusters it serves)."""
        self._call("GET", "/admin/v2/clusters", deadline=self._deadline())

    def describe_topic(self, topic: TopicName) -> PulsarTopic | None:
        deadline = self._deadline()
        found = self._call("GET", f"{topic.path}/partitions", deadline=deadline, missing=True)
        # A topic that was never created answers {"partitions": 0}: not partitioned, not ours.
        if not isinstance(found, dict) or not found.get("partitions"):
            return None
        retention = self._call("GET", f"{topic.path}/retention", deadline=deadline, missing=True)
        minutes = mb = None
        if isinstance(retention, dict):
            minutes = retention.get("retentionTimeInMinutes")
            mb = retention.get("retentionSizeInMB")
        return PulsarTopic(str(topic), int(found["partitions"]), minutes, mb)

    def create_topic(
        self, topic: TopicName, partitions: int, *, retention_minutes: int, retention_mb: int
    ) -> None:
        """A partitioned topic with its own retention: the broker's default would delete what no
        subscription holds, and a log's readers subscribe only while they read."""
        if partitions < 1:
            raise InvalidInputError(
                f"a Pulsar topic needs at least one partition, not {partitions}"
            )
        deadline = self._deadline()
        self._call("PUT", f"{topic.path}/partitions", body=partitions, deadline=deadline,
                   exists=True)  # fmt: skip
        self.set_retention(topic, retention_minutes, retention_mb, deadline=deadline)

    def set_retention(
        self, topic: TopicName, minutes: int, mb: int, *, deadline: float | None = None
    ) -> None:
        body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": mb}
        self._call("POST", f"{topic.path}/retention", body=body,
                   deadline=deadline or self._deadline())  # fmt: skip

    def set_deduplication(self, topic: TopicName, enabled: bool) -> None:
        """Broker-side deduplication of the topic (by producer name and sequence id)."""
        self._call("POST", f"{topic.path}/deduplicationEnabled", body=enabled,
                   deadline=self._deadline())  # fmt: skip

    def add_partitions(self, topic: TopicName, total: int) -> None:
        """Grow the topic to ``total`` partitions (Pulsar never shrinks one)."""
        self._call("POST", f"{topic.path}/partitions", body=total, deadline=self._deadline())

    def delete_topic(self, topic: TopicName) -> None:
        """Delete the topic and its messages, even while clients are connected."""
        self._call("DELETE", f"{topic.path}/partitions?force=true", deadline=self._deadline())

    def namespace_exists(self, topic: TopicName) -> bool:
        """Whether the topic's tenant and namespace exist (a topic cannot be created outside one)."""
        found = self._call("GET", f"/admin/v2/namespaces/{_quote(topic.tenant)}",
                           deadline=self._deadline(), missing=True)  # fmt: skip
        return isinstance(found, list) and f"{topic.tenant}/{topic.namespace}" in found

    def write_quorum(self, topic: TopicName) -> int | None:
        """How many bookies each entry of the topic is written to: the namespace's persistence
        policy, else the broker's default (``managedLedgerDefaultWriteQuorum``); None: unknown."""
        deadline = self._deadline()
        path = f"/admin/v2/namespaces/{_quote(topic.tenant)}/{_quote(topic.namespace)}"
        policy = self._call("GET", f"{path}/persistence", deadline=deadline, missing=True)
        if isinstance(policy, dict) and int(policy.get("bookkeeperWriteQuorum") or 0) > 0:
            return int(policy["bookkeeperWriteQuorum"])
        runtime = self._call(
            "GET", "/admin/v2/brokers/configuration/runtime", deadline=deadline, missing=True
        )
        value = (
            runtime.get("managedLedgerDefaultWriteQuorum") if isinstance(runtime, dict) else None
        )
        return int(value) if value is not None and str(value).isdigit() else None

    def max_message_size(self) -> int:
        """The largest message the brokers take (``maxMessageSize``; Pulsar's default, 5 MiB,
        when the runtime configuration does not say)."""
        runtime = self._call(
            "GET", "/admin/v2/brokers/configuration/runtime", deadline=self._deadline(),
            missing=True,
        )  # fmt: skip
        value = runtime.get("maxMessageSize") if isinstance(runtime, dict) else None
        text = str(value).strip() if value is not None else ""
        return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_MESSAGE_SIZE

    def held_entries(self, topic: TopicName, partitions: int) -> dict[int, int]:
        """Each partition's entries held in its ledgers (``internalStats.numberOfEntries``): with
        batching off (logstore's producer) one entry is one message."""
        deadline = self._deadline()
        out: dict[int, int] = {}
        for index in range(partitions):
            part = TopicName(
                topic.tenant, topic.namespace, f"{topic.topic}{_PARTITION_SUFFIX}{index}"
            )
            stats = self._call("GET", f"{part.path}/internalStats", deadline=deadline)
            if not isinstance(stats, dict):
                raise BrokerError(f"Pulsar answered no internal stats for {part}: {stats!r}")
            out[index] = max(0, int(stats.get("numberOfEntries") or 0))
        return out

    def messages_after(
        self, topic: TopicName, after: Mapping[int, MessagePosition | None]
    ) -> dict[int, int]:
        """For each partition of ``after``, the messages it holds after that position (all it
        holds for None), counted from its ledgers' entries (``internalStats``): message ids are
        not dense, so a lag is never the difference of two ids. With batching off (logstore's
        producer) one entry is one message."""
        deadline = self._deadline()
        out: dict[int, int] = {}
        for index, position in sorted(after.items()):
            part = TopicName(
                topic.tenant, topic.namespace, f"{topic.topic}{_PARTITION_SUFFIX}{index}"
            )
            stats = self._call("GET", f"{part.path}/internalStats", deadline=deadline)
            if not isinstance(stats, dict):
                raise BrokerError(f"Pulsar answered no internal stats for {part}: {stats!r}")
            out[index] = entries_after(stats, position)
        return out

    def last_positions(
        self, topic: TopicName, partitions: int
    ) -> dict[int, MessagePosition | None]:
        """Each partition's last message (None: the partition holds none)."""
        deadline = self._deadline()
        out: dict[int, MessagePosition | None] = {}
        for index in range(partitions):
            part = TopicName(
                topic.tenant, topic.namespace, f"{topic.topic}{_PARTITION_SUFFIX}{index}"
            )
            found = self._call("GET", f"{part.path}/lastMessageId", deadline=deadline)
            if not isinstance(found, dict):
                raise BrokerError(f"Pulsar answered no message id for {part}: {found!r}")
            ledger, entry = int(found["ledgerId"]), int(found["entryId"])
            # An empty partition answers entry -1 (nothing written to its ledger yet).
            out[index] = (
                None
                if entry < 0
                else MessagePosition(ledger, entry, int(found.get("batchIndex", -1)))
            )
        return out

    # ----------------------------------------------------------------------------------- HTTP

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def _call(
        self,
        method: str,
        path: str,
        *,
        deadline: float,
        body: Any = None,
        missing: bool = False,
        exists: bool = False,
    ) -> Any:
        remaining = deadline - time.monotonic()
        what = f"{method} {self.web_url}{path.split('?')[0]}"
        if remaining <= 0:
            raise BrokerError(
                f"the Pulsar admin API did not answer within {self.timeout_s:g}s ({what})"
            )
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(
            self.web_url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=remaining) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            reason = _reason(exc)
            if exc.code == 404 and missing:
                return None
            if exc.code == 404:
                raise TopicNotFoundError(
                    f"Pulsar has no such topic or namespace ({what}): {reason}"
                ) from None
            if exc.code == 409 and exists:
                raise TopicExistsError(f"the Pulsar topic already exists ({what})") from None
            if exc.code == 401:
                raise KafkaAuthenticationError(
                    f"Pulsar refused the credentials ({what})",
                    hint="check the admin token (never printed)",
                ) from None
            if exc.code == 403:
                raise KafkaAuthorizationError(
                    f"Pulsar refused {method} to this client ({what}): {reason}",
                    hint="grant the role the tenant's admin or the topic's produce/consume permission",
                ) from None
            raise BrokerError(f"Pulsar answered {exc.code} to {what}: {reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            cause = getattr(exc, "reason", exc)
            raise BrokerError(
                f"the Pulsar admin API at {self.web_url} is unreachable: {cause}",
                hint="is Pulsar running? ('logstore pulsar status' for the local one)",
            ) from None
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            raise BrokerError(f"Pulsar answered {what} with something that is not JSON") from None


def entries_after(stats: Mapping[str, Any], position: MessagePosition | None) -> int:
    """The entries a partition's ``internalStats`` hold after ``position`` (all for None).

    Its ``ledgers`` list the ledgers still held, oldest first; the last one, while open, says 0
    entries and ``currentLedgerEntries`` has its count. Ledgers trimmed by retention are not
    listed: what they held is no longer there to read.
    """
    ledgers = [x for x in stats.get("ledgers") or () if isinstance(x, dict)]
    total = 0
    for i, ledger in enumerate(ledgers):
        entries = max(0, int(ledger.get("entries") or 0))
        if i == len(ledgers) - 1:
            entries = max(entries, int(stats.get("currentLedgerEntries") or 0))
        ledger_id = int(ledger.get("ledgerId", -1))
        if position is None or ledger_id > position.ledger:
            total += entries
        elif ledger_id == position.ledger:
            total += max(0, entries - (position.entry + 1))
    return total


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def admin_url_for(service_url: str, configured: str | None, local: tuple[str, str] | None) -> str:
    """The admin API of the Pulsar behind ``service_url`` (``pulsar://host:port[,host:port…]``):
    ``configured`` (``[pulsar] admin_url``) when given; the local standalone's web URL when
    ``local`` (its service URL, its web URL) is that Pulsar; else Pulsar's default web port on
    the first host (``http://host:8080``)."""
    if configured:
        return configured
    hosts = [h.strip() for h in service_url.removeprefix("pulsar://").split(",") if h.strip()]

    def same(a: str) -> str:
        return a.lower().replace("localhost:", "127.0.0.1:")

    if local is not None:
        local_hosts = {same(h) for h in local[0].removeprefix("pulsar://").split(",")}
        if any(same(h) in local_hosts for h in hosts):
            return local[1]
    host = hosts[0].rsplit(":", 1)[0] if hosts else "127.0.0.1"
    return f"http://{host}:8080"


def _reason(exc: urllib.error.HTTPError) -> str:
    """Pulsar's own explanation (``{"reason": …}``), short and on one line."""
    try:
        data = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        data = {}
    text = str(data.get("reason") or exc.reason or "") if isinstance(data, dict) else ""
    return " ".join(text.split())[:300]
