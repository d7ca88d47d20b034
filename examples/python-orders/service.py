"""The order service of the python-orders example.

It changes an order and writes the change's event in ONE SQLAlchemy transaction, the way the seeds'
services do. Every change bumps the order's version; the event carries it, so a consumer can
check the order of an order's events. Three ways to write the event, --shape:

- outboxkit (default): outboxkit's own table, by a plain INSERT of its columns (docs/writers.md).
  The database's trigger gives the event outboxkit's key hash, partition and per-key lock.
- wal: no row at all. The event is a transactional logical decoding message emitted by the
  function `outboxkit migrate` installs, <outbox>_emit(...) (docs/wal.md, docs/writers.md), for
  the wal source (in progress: its relay is not built yet, the test reads the slot itself).
- seed004: the table of seed 004 (id, aggregate_id, aggregate_type, event_type, payload JSONB,
  headers JSONB, status, retry_count, ...), written exactly as the seed's OrderService does; the
  relay reads it after `outboxkit adopt` (docs/adopting.md), and marks its rows PUBLISHED.

    python service.py schema --dsn postgres://...                  # the orders table
    python service.py schema --dsn postgres://... --shape seed004   # and seed 004's outbox_events
    python service.py write --dsn postgres://... --orders 20 --changes 200 --threads 4 \
        --rollback 0.1 --topic orders.events --outbox outbox_events
    python service.py schedule --dsn postgres://... --orders 3 --delay 2 --topic orders.events \
        --outbox outbox_events

`write` prints one JSON object: the committed and the rolled-back events. `schedule` (shape
outboxkit) places --orders orders, each with a PaymentDeadline event due --delay seconds later
(the deliver_at column, docs/scheduled.md), pays the first one and cancels its deadline in the
payment's transaction, and prints the scheduled and the cancelled events.
"""

import argparse
import json
import random
import sys
import threading
import uuid

from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from common import engine_for, table_name


class SimulatedFailure(Exception):
    """Raised after the writes of a transaction the service decided to roll back."""


class OutboxkitTable:
    """outboxkit's outbox table, written by a plain INSERT of its columns (docs/writers.md)."""

    def __init__(self, table: str, topic: str):
        self.table = table
        self.topic = topic

    def create(self, conn) -> None:
        """Nothing: `outboxkit migrate` creates the table."""

    def add_event(self, session, event_id: str, order_id: str, event_type: str, payload: dict) -> None:
        # The relay adds the event_id header itself; the headers here are the service's own.
        session.execute(
            text(f"""INSERT INTO {self.table}
                     (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers)
                     VALUES (:id, :topic, 'Order', :aid, :etype, :payload, CAST(:headers AS jsonb))"""),
            {
                "id": event_id,
                "topic": self.topic,
                "aid": order_id,
                "etype": event_type,
                "payload": json.dumps(payload).encode("utf-8"),
                "headers": json.dumps({"source": "order-service"}),
            },
        )


    def add_scheduled(self, session, event_id: str, order_id: str, event_type: str, payload: dict, delay: float) -> str:
        """Writes a scheduled event: deliver_at, here the database's now() + delay seconds. The
        table's trigger marks the row scheduled (status 4); the relay publishes it at or after
        deliver_at. Returns deliver_at as the database stored it (ISO 8601)."""
        return session.execute(
            text(f"""INSERT INTO {self.table}
                     (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers, deliver_at)
                     VALUES (:id, :topic, 'Order', :aid, :etype, :payload, CAST(:headers AS jsonb),
                             now() + make_interval(secs => :delay))
                     RETURNING to_char(deliver_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""),
            {
                "id": event_id,
                "topic": self.topic,
                "aid": order_id,
                "etype": event_type,
                "payload": json.dumps(payload).encode("utf-8"),
                "headers": json.dumps({"source": "order-service"}),
                "delay": delay,
            },
        ).scalar_one()

    def cancel(self, session, event_ids: list) -> list:
        """Cancels scheduled events (docs/scheduled.md): returns the ids cancelled; the others
        were not scheduled any more (already released or published, or unknown)."""
        return [str(r) for r in session.execute(
            text(f"DELETE FROM {self.table} WHERE status = 4 AND event_id = ANY(CAST(:ids AS uuid[])) RETURNING event_id"),
            {"ids": event_ids},
        ).scalars()]


class WalEmit:
    """No row: the event is emitted as a logical decoding message by <outbox>_emit (docs/wal.md)."""

    def __init__(self, table: str, topic: str):
        self.table = table
        self.topic = topic

    def create(self, conn) -> None:
        """Nothing: `outboxkit migrate` installs the function."""

    def add_event(self, session, event_id: str, order_id: str, event_type: str, payload: dict) -> None:
        session.execute(
            text(f"""SELECT {self.table}_emit(:topic, 'Order', :aid, :etype, :payload,
                     CAST(:headers AS jsonb), '', CAST(:id AS uuid))"""),
            {
                "id": event_id,
                "topic": self.topic,
                "aid": order_id,
                "etype": event_type,
                "payload": json.dumps(payload).encode("utf-8"),
                "headers": json.dumps({"source": "order-service"}),
            },
        )


class Seed004Table:
    """Seed 004's outbox_events table, created and written exactly as the seed does."""

    def __init__(self, table: str):
        self.table = table

    def create(self, conn) -> None:
        conn.execute(text(f"""CREATE TABLE IF NOT EXISTS {self.table} (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            aggregate_id VARCHAR(255) NOT NULL,
            aggregate_type VARCHAR(100) NOT NULL,
            event_type VARCHAR(100) NOT NULL,
            payload JSONB NOT NULL,
            headers JSONB DEFAULT '{{}}',
            created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
            published_at TIMESTAMPTZ,
            status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
            retry_count INTEGER NOT NULL DEFAULT 0,
            next_retry_at TIMESTAMPTZ)"""))
        conn.execute(text(f"CREATE INDEX IF NOT EXISTS {self.table}_status ON {self.table} (status, created_at)"))
        conn.execute(text(f"CREATE INDEX IF NOT EXISTS {self.table}_aggregate ON {self.table} (aggregate_id, created_at)"))

    def add_event(self, session, event_id: str, order_id: str, event_type: str, payload: dict) -> None:
        # The seed's statement and parameters: JSON text for the JSONB columns, the event id in
        # the headers too (outboxkit's adoption drops that reserved header and sets its own).
        session.execute(
            text(f"""INSERT INTO {self.table}
                    (id, aggregate_id, aggregate_type, event_type, payload, headers)
                    VALUES (:id, :aid, :atype, :etype, :payload, :headers)"""),
            {
                "id": event_id,
                "aid": order_id,
                "atype": "Order",
                "etype": event_type,
                "payload": json.dumps(payload),
                "headers": json.dumps({"event_id": event_id, "source": "order-service"}),
            },
        )


class OrderService:
    """Writes an order change and its event in one transaction."""

    def __init__(self, session_factory, orders: str, outbox):
        self.Session = session_factory
        self.orders = orders
        self.outbox = outbox

    def change_order(self, order_id: str, customer_id: str, total: int, fail: bool) -> dict:
        """Creates the order or bumps its version, with its event; rolls back when fail is set."""
        event_id = str(uuid.uuid4())
        session = self.Session()
        try:
            # The upsert locks the order's row: concurrent changes of one order queue here, so
            # versions follow commit order.
            version = session.execute(
                text(f"""INSERT INTO {self.orders} (id, customer_id, total, status, version)
                         VALUES (:id, :cid, :total, 'PENDING', 1)
                         ON CONFLICT (id) DO UPDATE
                         SET version = {self.orders}.version + 1, total = EXCLUDED.total, status = 'UPDATED'
                         RETURNING version"""),
                {"id": order_id, "cid": customer_id, "total": total},
            ).scalar_one()
            event_type = "OrderCreated" if version == 1 else "OrderUpdated"
            # The event, in the SAME transaction.
            self.outbox.add_event(session, event_id, order_id, event_type, {
                "orderId": order_id,
                "customerId": customer_id,
                "total": total,
                "version": version,
            })
            if fail:
                raise SimulatedFailure(order_id)
            session.commit()
            return {"event_id": event_id, "order_id": order_id, "version": version, "committed": True}
        except SimulatedFailure:
            session.rollback()
            return {"event_id": event_id, "order_id": order_id, "version": version, "committed": False}
        except Exception:
            session.rollback()
            raise
        finally:
            session.close()


def schedule(args) -> int:
    """Places orders with a PaymentDeadline each, pays the first and cancels its deadline."""
    outbox = outbox_for(args)
    if not isinstance(outbox, OutboxkitTable):
        raise SystemExit("schedule needs --shape outboxkit")
    engine = engine_for(args.dsn)
    Session = sessionmaker(bind=engine)
    orders = table_name(args.prefix, "orders")
    scheduled = []
    for i in range(args.orders):
        order_id, event_id = f"order-{args.run}-{i}", str(uuid.uuid4())
        with Session.begin() as session:  # the order and its deadline: one transaction
            session.execute(
                text(f"""INSERT INTO {orders} (id, customer_id, total, status, version)
                         VALUES (:id, 'customer-1', 100, 'PENDING', 1)"""),
                {"id": order_id},
            )
            due = outbox.add_scheduled(session, event_id, order_id, "PaymentDeadline",
                                       {"orderId": order_id, "version": 1}, args.delay)
        scheduled.append({"event_id": event_id, "order_id": order_id, "deliver_at": due})
    paid = scheduled[0]
    with Session.begin() as session:  # the payment and the cancel of its deadline: one transaction
        session.execute(text(f"UPDATE {orders} SET status = 'PAID', version = version + 1 WHERE id = :id"),
                        {"id": paid["order_id"]})
        cancelled = outbox.cancel(session, [paid["event_id"]])
    json.dump({"scheduled": scheduled, "cancelled": cancelled}, sys.stdout)
    print()
    return 0


def create_schema(engine, orders: str, outbox) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"""CREATE TABLE IF NOT EXISTS {orders} (
            id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL,
            total INTEGER NOT NULL,
            status VARCHAR(20) NOT NULL,
            version INTEGER NOT NULL)"""))
        outbox.create(conn)


def outbox_for(args):
    """The outbox table of --shape."""
    table = table_name("", args.outbox)
    if args.shape == "seed004":
        return Seed004Table(table)
    if args.shape == "wal":
        return WalEmit(table, args.topic)
    return OutboxkitTable(table, args.topic)


def write(args) -> int:
    engine = engine_for(args.dsn, pool_size=args.threads)
    service = OrderService(sessionmaker(bind=engine), table_name(args.prefix, "orders"), outbox_for(args))
    order_ids = [f"order-{args.run}-{i}" for i in range(args.orders)]
    results, errors, lock = [], [], threading.Lock()
    counter = iter(range(args.changes))

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            order_id = rng.choice(order_ids)
            try:
                r = service.change_order(order_id, "customer-" + order_id[-1], rng.randint(1, 500), rng.random() < args.rollback)
            except Exception as exc:  # reported, and the run fails
                with lock:
                    errors.append(f"{order_id}: {exc}")
                return
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker, args=(args.seed + i,)) for i in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    json.dump({
        "committed": [r for r in results if r["committed"]],
        "rolled_back": [r for r in results if not r["committed"]],
        "errors": errors,
    }, sys.stdout)
    print()
    return 1 if errors else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["schema", "write", "schedule"])
    p.add_argument("--dsn", required=True, help="PostgreSQL URL, postgres://user:pass@host:port/db")
    p.add_argument("--prefix", default="", help="prefix of the example's own tables")
    p.add_argument("--shape", choices=["outboxkit", "wal", "seed004"], default="outboxkit", help="the outbox table's shape")
    p.add_argument("--outbox", default="outbox_events", help="the outbox table")
    p.add_argument("--topic", default="order.events", help="the events' Kafka topic (shape outboxkit; seed004's relay derives it)")
    p.add_argument("--orders", type=int, default=10, help="how many orders (the ordering keys)")
    p.add_argument("--changes", type=int, default=100, help="how many transactions")
    p.add_argument("--threads", type=int, default=4, help="concurrent writers")
    p.add_argument("--rollback", type=float, default=0.1, help="share of transactions rolled back")
    p.add_argument("--run", default=uuid.uuid4().hex[:8], help="run id, part of the order ids")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--delay", type=float, default=2.0, help="schedule: seconds from now to each deadline")
    args = p.parse_args()
    if args.command == "schema":
        create_schema(engine_for(args.dsn), table_name(args.prefix, "orders"), outbox_for(args))
        return 0
    if args.command == "schedule":
        return schedule(args)
    return write(args)


if __name__ == "__main__":
    sys.exit(main())
