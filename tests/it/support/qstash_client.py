"""Drives delayer's QStash API with QStash's own Python SDK (PyPI `qstash`), as an application does.

Usage: qstash_client.py BASE_URL TOKEN COMMAND < JSON_ARGUMENTS
Prints what the SDK returned, as JSON; an SDK error prints {"error": "..."}.
"""

import dataclasses
import json
import sys

from qstash import QStash


def plain(value):
    if dataclasses.is_dataclass(value):
        return {key: plain(item) for key, item in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if hasattr(value, "value"):  # an enum
        return value.value
    return value


def main():
    base_url, token, command = sys.argv[1:4]
    arguments = json.load(sys.stdin)
    client = QStash(token, base_url=base_url)
    message = client.message
    try:
        if command == "publish_json":
            result = message.publish_json(**arguments)
        elif command == "publish":
            result = message.publish(**arguments)
        elif command == "enqueue_json":
            result = message.enqueue_json(**arguments)
        elif command == "batch_json":
            result = message.batch_json(arguments)
        elif command == "get":
            result = message.get(arguments["id"])
        elif command == "cancel":
            result = message.cancel(arguments["id"])
        elif command == "cancel_many":
            result = message.cancel_many(arguments["ids"])
        elif command == "cancel_all":
            result = message.cancel_all()
        elif command == "dlq_list":
            result = client.dlq.list(**arguments)
        elif command == "dlq_get":
            result = client.dlq.get(arguments["id"])
        elif command == "dlq_delete":
            result = client.dlq.delete(arguments["id"])
        elif command == "dlq_delete_many":
            result = client.dlq.delete_many(arguments["ids"])
        elif command == "queue_upsert":
            result = client.queue.upsert(**arguments)
        elif command == "queue_get":
            result = client.queue.get(arguments["queue"])
        elif command == "queue_list":
            result = client.queue.list()
        elif command == "queue_pause":
            result = client.queue.pause(arguments["queue"])
        elif command == "queue_resume":
            result = client.queue.resume(arguments["queue"])
        elif command == "queue_delete":
            result = client.queue.delete(arguments["queue"])
        elif command == "keys":
            result = client.signing_key.get()
        elif command == "schedule_create_json":
            result = client.schedule.create_json(**arguments)
        elif command == "schedule_get":
            result = client.schedule.get(arguments["id"])
        elif command == "schedule_list":
            result = client.schedule.list()
        elif command == "schedule_pause":
            result = client.schedule.pause(arguments["id"])
        elif command == "schedule_resume":
            result = client.schedule.resume(arguments["id"])
        elif command == "schedule_delete":
            result = client.schedule.delete(arguments["id"])
        else:
            raise SystemExit(f"unknown command {command}")
    except Exception as error:  # the SDK's QStashError, and what the API answered
        print(json.dumps({"error": str(error)}))
        return
    print(json.dumps(plain(result)))


main()
