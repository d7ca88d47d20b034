"""Reads a Pulsar topic of the relay's Avro events with the Apache Pulsar Python client's typed
consumer (pulsar-client, pulsar.schema.AvroSchema of a Record class written here for the test's
order schema) and prints them as JSON:
[{"key": ..., "properties": {...}, "schema_version": N, "writer_schema": {"type": ..., "schema": ...},
  "value": {...}}, ...] in the order received.

usage: pulsar_avro_consumer.py SERVICE_URL TOPIC COUNT

The consumer subscribes with the Record's Avro schema, which the broker checks against the schema
the topic has in its own registry. Each message's value is read by the client's own
AvroSchema.decode_message: the writer schema is the one the broker's registry has for the
message's schema version, resolved against the Record's. The writer schema is also fetched
explicitly (the client's get_schema_info) and printed, so that the test sees the broker's copy.
"""
import enum
import json
import sys

import pulsar
from pulsar.schema import (Array, AvroSchema, Boolean, CustomEnum, Double, Integer, Long, Map,
                           Record, String)


class Status(enum.Enum):
    NEW = 0
    SHIPPED = 1


class Item(Record):
    _avro_namespace = "outboxkit.test"
    sku = String(required=True)
    qty = Integer(required=True)


class Order(Record):
    _avro_namespace = "outboxkit.test"
    id = String(required=True)
    amount = Long(required=True)
    qty = Integer(required=True)
    price = Double(required=True)
    paid = Boolean(required=True)
    status = CustomEnum(Status, required=True)
    note = String()
    tags = Array(String(required=True), required=True)
    items = Array(Item(required=True), required=True)
    attrs = Map(Long(required=True), required=True)


def to_json(value):
    """A Record (and what it holds) as plain JSON values: records as objects, enums by name."""
    if isinstance(value, Record):
        return {name: to_json(getattr(value, name)) for name in type(value)._fields}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


def main():
    service_url, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        consumer = client.subscribe(topic, "python-typed", schema=AvroSchema(Order),
                                    initial_position=pulsar.InitialPosition.Earliest)
        out = []
        for _ in range(count):
            msg = consumer.receive(timeout_millis=60000)
            version = msg._message.int_schema_version()
            info = client._client.get_schema_info(topic, version)
            out.append({
                "key": msg.partition_key(),
                "properties": msg.properties(),
                "schema_version": version,
                "writer_schema": {"type": str(info.schema_type()), "schema": info.schema()},
                "value": to_json(msg.value()),
            })
            consumer.acknowledge(msg)
        consumer.close()
    finally:
        client.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
