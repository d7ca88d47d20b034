"""Reads a topic of the relay's registry-encoded events with confluent-kafka's own deserializers
and prints them as JSON: [{"key": ..., "headers": {...}, "value": {...}, "index": [...]}, ...] in
partition and offset order.

usage: registry_consumer.py FORMAT BROKERS TOPIC REGISTRY_URL COUNT

FORMAT avro: AvroDeserializer (the schema by the id in each record's Confluent header, fetched
from the registry). FORMAT json: JSONDeserializer without a schema of its own (it fetches the
schema by id and validates the record with the jsonschema package). FORMAT protobuf: the schema's
.proto text, fetched by id, is compiled with protoc (grpcio-tools) into Python classes, with the
files it imports from other subjects (its references) written under their names; the class
is the one the record's event_type header names (else the file's first message); the record's
message indexes, read by ProtobufDeserializer's own reader, must equal the ones confluent-kafka
computes for that class; the value is read by ProtobufDeserializer and printed by protobuf's
json_format.MessageToDict (JSON field names, 64-bit integers as strings, bytes in base64).
"""
import importlib
import io
import json
import os
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext


class ProtobufReader:
    """Compiles each schema id's .proto once and reads records with ProtobufDeserializer."""

    def __init__(self, registry):
        from confluent_kafka.schema_registry import protobuf  # needs the protobuf package
        self._protobuf = protobuf
        self._registry = registry
        self._dir = tempfile.mkdtemp(prefix="outboxkit-proto-")
        sys.path.insert(0, self._dir)
        self._modules = {}

    def _module(self, schema_id):
        if schema_id not in self._modules:
            import grpc_tools
            from grpc_tools import protoc
            name = "registered_%d" % schema_id
            schema = self._registry.get_schema(schema_id)
            with open(os.path.join(self._dir, name + ".proto"), "w") as f:
                f.write(schema.schema_str)
            files = [os.path.join(self._dir, name + ".proto")] + self._write_references(schema)
            include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
            rc = protoc.main(["protoc", "-I" + self._dir, "-I" + include, "--python_out=" + self._dir] + files)
            if rc != 0:
                raise RuntimeError("protoc failed on schema %d" % schema_id)
            self._modules[schema_id] = importlib.import_module(name + "_pb2")
        return self._modules[schema_id]

    def _write_references(self, schema):
        """Writes the .proto files schema imports from other subjects under their reference names."""
        paths = []
        for ref in schema.references or []:
            referenced = self._registry.get_version(ref.subject, ref.version).schema
            path = os.path.join(self._dir, ref.name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(referenced.schema_str)
            paths += [path] + self._write_references(referenced)
        return paths

    def __call__(self, value, ctx, headers):
        from google.protobuf import json_format, message_factory
        schema_id = int.from_bytes(value[1:5], "big")
        module = self._module(schema_id)
        type_name = headers.get("event_type")
        if type_name:
            desc = module.DESCRIPTOR.pool.FindMessageTypeByName(type_name)
        else:
            desc = list(module.DESCRIPTOR.message_types_by_name.values())[0]
        cls = message_factory.GetMessageClass(desc)
        index = self._protobuf.ProtobufDeserializer._read_index_array(io.BytesIO(value[5:]), zigzag=True)
        want = self._protobuf._create_index_array(desc)
        if list(index) != list(want):
            raise RuntimeError("message indexes %s, confluent-kafka computes %s for %s" % (index, want, desc.full_name))
        msg = self._protobuf.ProtobufDeserializer(cls, {"use.deprecated.format": False})(value, ctx)
        return json_format.MessageToDict(msg), list(index)


def main():
    fmt, brokers, topic, registry_url, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    registry = SchemaRegistryClient({"url": registry_url})
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        avro = AvroDeserializer(registry)
        deserialize = lambda value, ctx, headers: (avro(value, ctx), None)
    elif fmt == "json":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer
        js = JSONDeserializer(None, schema_registry_client=registry)
        deserialize = lambda value, ctx, headers: (js(value, ctx), None)
    elif fmt == "protobuf":
        deserialize = ProtobufReader(registry)
    else:
        raise SystemExit("unknown format " + fmt)
    consumer = Consumer({
        "bootstrap.servers": brokers,
        "group.id": "registry-interop-" + uuid.uuid4().hex,
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
            headers = {k: v.decode() for k, v in (msg.headers() or [])}
            value, index = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE), headers)
            records.append({
                "partition": msg.partition(),
                "offset": msg.offset(),
                "key": msg.key().decode(),
                "headers": headers,
                "value": value,
                "index": index,
            })
    finally:
        consumer.close()
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    # default=str: fastavro gives logical types as date, datetime, time, Decimal and UUID objects.
    json.dump(records, sys.stdout, default=str)


if __name__ == "__main__":
    main()
