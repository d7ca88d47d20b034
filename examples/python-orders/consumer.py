"""The consumer of the python-orders example: an idempotent Kafka consumer.

Each event is applied in one database transaction with its event id's row in a processed-events
table (INSERT ... ON CONFLICT DO NOTHING): a redelivered event finds its row and is acknowledged
without being applied twice. The Kafka offset is committed after the database transaction, so a
crash between the two means a redelivery, which the table absorbs. Applying an order's event
checks its version against the order's view: the versions of an order must arrive 1, 2, 3, ...

    python consumer.py --dsn postgres://... --brokers 127.0.0.1:9092 --topic order.events \
        --group billing --expect 180 --timeout 120

It stops once the processed-events table holds --expect events and the topic has been quiet for
--idle seconds, and prints one JSON object: events applied, duplicates, order violations.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException
from sqlalchemy import text

from common import engine_for, table_name


class Inbox:
    """Applies each event once, recording its id in the processed-events table."""

    def __init__(self, engine, processed: str, views: str):
        self.engine = engine
        self.processed = processed
        self.views = views

    def create_schema(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(f"""CREATE TABLE IF NOT EXISTS {self.processed} (
                event_id UUID PRIMARY KEY,
                applied BIGSERIAL NOT NULL,
                order_id TEXT NOT NULL,
                version INTEGER NOT NULL,
                processed_at TIMESTAMPTZ NOT NULL DEFAULT now())"""))
            conn.execute(text(f"""CREATE TABLE IF NOT EXISTS {self.views} (
                order_id TEXT PRIMARY KEY,
                version INTEGER NOT NULL,
                total INTEGER NOT NULL)"""))

    def handle(self, event_id: str, event: dict) -> tuple[bool, str | None]:
        """Applies event unless already processed: (applied, order violation or None)."""
        with self.engine.begin() as conn:
            new = conn.execute(
                text(f"""INSERT INTO {self.processed} (event_id, order_id, version)
                         VALUES (:id, :order, :version) ON CONFLICT (event_id) DO NOTHING
                         RETURNING event_id"""),
                {"id": event_id, "order": event["orderId"], "version": event["version"]},
            ).first()
            if new is None:
                return False, None
            last = conn.execute(
                text(f"SELECT version FROM {self.views} WHERE order_id = :id FOR UPDATE"),
                {"id": event["orderId"]},
            ).scalar()
            violation = None
            if event["version"] != (last or 0) + 1:
                violation = f"order {event['orderId']}: version {event['version']} after {last}"
            conn.execute(
                text(f"""INSERT INTO {self.views} (order_id, version, total) VALUES (:id, :version, :total)
                         ON CONFLICT (order_id) DO UPDATE SET version = EXCLUDED.version, total = EXCLUDED.total"""),
                {"id": event["orderId"], "version": event["version"], "total": event["total"]},
            )
            return True, violation

    def count(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(text(f"SELECT count(*) FROM {self.processed}")).scalar_one()


def consume(args) -> int:
    inbox = Inbox(engine_for(args.dsn), table_name(args.prefix, "processed_events"), table_name(args.prefix, "order_views"))
    inbox.create_schema()
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([args.topic])
    applied, duplicates, violations = 0, 0, []
    deadline = time.monotonic() + args.timeout
    last_message = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                idle = last_message is not None and time.monotonic() - last_message >= args.idle
                if idle and inbox.count() >= args.expect:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            last_message = time.monotonic()
            headers = {k: (v or b"").decode("utf-8") for k, v in (msg.headers() or [])}
            event = json.loads(msg.value())
            new, violation = inbox.handle(headers["event_id"], event)
            if new:
                applied += 1
            else:
                duplicates += 1
            if violation:
                violations.append(violation)
            consumer.commit(message=msg, asynchronous=False)
        else:
            print(f"consumer: timed out after {args.timeout}s with {inbox.count()} of {args.expect} events", file=sys.stderr)
            return 1
    finally:
        consumer.close()
    json.dump({"applied": applied, "duplicates": duplicates, "violations": violations}, sys.stdout)
    print()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", required=True, help="PostgreSQL URL of the consumer's database")
    p.add_argument("--prefix", default="", help="prefix of the consumer's tables")
    p.add_argument("--brokers", required=True, help="Kafka bootstrap servers, host:port[,host:port]")
    p.add_argument("--topic", default="order.events")
    p.add_argument("--group", default="order-views")
    p.add_argument("--expect", type=int, required=True, help="stop once this many events were processed")
    p.add_argument("--idle", type=float, default=3.0, help="seconds without a message before stopping")
    p.add_argument("--timeout", type=float, default=120.0)
    return consume(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
