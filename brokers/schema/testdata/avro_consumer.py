"""Reads a topic of the relay's Avro events with confluent-kafka's AvroDeserializer (the schema by
the id in each record's Confluent header, fetched from the registry) and prints them as JSON:
[{"key": ..., "headers": {...}, "value": {...}}, ...] in partition and offset order.

usage: avro_consumer.py BROKERS TOPIC REGISTRY_URL COUNT
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def main():
    brokers, topic, registry_url, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    consumer = Consumer({
        "bootstrap.servers": brokers,
        "group.id": "avro-interop-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    records = []
    deadline = time.monotonic() + 60
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(str(msg.error()))
            value = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
            records.append({
                "partition": msg.partition(),
                "offset": msg.offset(),
                "key": msg.key().decode(),
                "headers": {k: v.decode() for k, v in (msg.headers() or [])},
                "value": value,
            })
    finally:
        consumer.close()
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    json.dump(records, sys.stdout)


if __name__ == "__main__":
    main()
