"""The Kafka tests' independent client (kafka-python, a pure-Python client we did not write).

  kafka_client.py read BROKER TOPIC[,TOPIC...] COUNT SECONDS
      Reads every partition of the topics from the beginning until COUNT messages came (then one
      second more, to see any extra copy) or SECONDS passed; prints one JSON object a message:
      topic, partition, offset, key, value, timestamp (ms), headers (name -> text).
  kafka_client.py produce BROKER TOPIC
      Produces the messages given on stdin, one JSON object a line: key (or null), value,
      headers (name -> text); waits until every one is acknowledged.
  kafka_client.py rewind BROKER GROUP TOPIC
      Commits offset 0 for every partition of TOPIC in consumer group GROUP (no member running).
  kafka_client.py committed BROKER GROUP TOPIC
      Prints the sum of GROUP's committed offsets over TOPIC's partitions.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def text(raw):
    return None if raw is None else raw.decode("utf-8", "replace")


def read(broker, topics, count, seconds):
    consumer = KafkaConsumer(bootstrap_servers=broker, group_id=None, enable_auto_commit=False)
    deadline = time.time() + seconds
    partitions = []
    for topic in topics.split(","):
        while True:
            found = consumer.partitions_for_topic(topic)
            if found or time.time() > deadline:
                break
            time.sleep(0.1)
        partitions += [TopicPartition(topic, p) for p in sorted(found or [])]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    seen, full_at = 0, None
    while time.time() < deadline and (full_at is None or time.time() < full_at + 1):
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                seen += 1
                print(json.dumps({
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "key": text(record.key),
                    "value": text(record.value),
                    "timestamp": record.timestamp,
                    "headers": {name: text(value) for name, value in record.headers or []},
                }))
        if full_at is None and seen >= count:
            full_at = time.time()
    sys.stdout.flush()
    consumer.close()


def produce(broker, topic):
    producer = KafkaProducer(bootstrap_servers=broker, acks="all")
    futures = []
    for line in sys.stdin:
        message = json.loads(line)
        key = message.get("key")
        futures.append(producer.send(
            topic,
            key=None if key is None else key.encode(),
            value=message["value"].encode(),
            headers=[(k, v.encode()) for k, v in message.get("headers", {}).items()],
        ))
    for future in futures:
        future.get(timeout=60)
    producer.flush()
    producer.close()


def group_consumer(broker, group, topic):
    consumer = KafkaConsumer(bootstrap_servers=broker, group_id=group, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    return consumer, partitions


def rewind(broker, group, topic):
    from kafka.structs import OffsetAndMetadata
    consumer, partitions = group_consumer(broker, group, topic)
    consumer.commit({p: OffsetAndMetadata(0, "", -1) for p in partitions})
    consumer.close()


def committed(broker, group, topic):
    consumer, partitions = group_consumer(broker, group, topic)
    print(sum(consumer.committed(p) or 0 for p in partitions))
    consumer.close()


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "produce":
        produce(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "rewind":
        rewind(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "committed":
        committed(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
