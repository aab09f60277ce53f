"""Channel and token notifications across registry processes through PostgreSQL
LISTEN/NOTIFY.

Each registry process on a PostgreSQL database runs one `PostgresChannelBus`: a thread that
holds its own autocommit connection, `LISTEN`s on `weact_channels` and wakes the process's
`ChannelNotifier` on every notification with an empty payload, its token `Changes` on every
one with the payload `tokens` (a token revoked: no long-poll wakes for it). A write
publishes with `pg_notify` after its transaction committed, so a woken waiter always reads
the new revision. Every process behind a load balancer hears every promotion, rollback,
adapter revoke and token revoke within a round trip.

While the listener is down (the database restarting), `cross_process` is false on both and
long-polls fall back to re-reading the database every interval; once it is back, both are
woken once, so that what may have been missed is re-read. `stop()` returns within `tick_s`.
"""

from __future__ import annotations

import logging
import random
import threading
from functools import partial

from sqlalchemy import text
from sqlalchemy.engine import URL, Engine

from registry.api.notify import Changes, ChannelNotifier

logger = logging.getLogger(__name__)

PG_CHANNEL = "weact_channels"
TOKENS = "tokens"  # the payload of a token change; a channel change has none


def channel_bus(
    engine: Engine, notifier: ChannelNotifier, tokens: Changes | None = None
) -> PostgresChannelBus | None:
    """The bus for the app's database: PostgreSQL has one, SQLite none (one process)."""
    if engine.url.get_backend_name() != "postgresql":
        return None
    return PostgresChannelBus(engine, notifier, tokens)


def libpq_url(url: URL) -> str:
    """A SQLAlchemy URL as libpq takes it (no `+driver`)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresChannelBus:
    """LISTEN in a thread, NOTIFY through the app's engine; wakes `notifier`."""

    def __init__(
        self,
        engine: Engine,
        notifier: ChannelNotifier,
        tokens: Changes | None = None,
        *,
        tick_s: float = 0.5,
        max_backoff_s: float = 10.0,
    ) -> None:
        self.conninfo = libpq_url(engine.url)
        self.engine = engine
        self.notifier = notifier
        self.topics: dict[str, Changes] = {"": notifier}  # payload -> what it moves
        if tokens is not None:
            self.topics[TOKENS] = tokens
        self.tick_s = tick_s
        self.max_backoff_s = max_backoff_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for payload, changes in self.topics.items():
            changes.publish = partial(self.publish, payload)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="weact-pg-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.tick_s + 5)
        self._connected(False)
        for changes in self.topics.values():
            changes.publish = None

    def publish(self, payload: str = "") -> None:
        """Tell every listening process (this one included) that a channel changed (no
        payload), or what `payload` names did."""
        with self.engine.connect() as connection:
            connection.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": PG_CHANNEL, "payload": payload},
            )
            connection.commit()

    def _connected(self, connected: bool) -> None:
        for changes in self.topics.values():
            changes.cross_process = connected

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = 0.2
            except Exception as exc:  # psycopg.Error, OSError: reconnect after a pause
                self._connected(False)
                logger.warning("channel listener lost its connection: %s", exc)
                self._stop.wait(backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, self.max_backoff_s)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute(f"LISTEN {PG_CHANNEL}")
            for changes in self.topics.values():
                changes.wake()  # re-read anything published while nobody listened
            self._connected(True)  # after the wakes: no stamp of before the outage is current
            logger.info("listening for channel notifications")
            while not self._stop.is_set():
                for notification in connection.notifies(timeout=self.tick_s):
                    # an unknown payload (a newer process) wakes the channels: never too few
                    self.topics.get(notification.payload, self.notifier).wake()
        self._connected(False)
