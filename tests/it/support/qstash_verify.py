"""Checks webhook signatures with QStash's own SDK (PyPI `qstash`), as a receiver does.

Usage: qstash_verify.py CURRENT_KEY NEXT_KEY < requests, one JSON object a line
({"signature": ..., "body": ..., "url": ...}); prints "ok" or the SDK's reason, a line each.
"""

import json
import sys

from qstash import Receiver


def main():
    receiver = Receiver(current_signing_key=sys.argv[1], next_signing_key=sys.argv[2])
    for line in sys.stdin:
        request = json.loads(line)
        try:
            receiver.verify(
                signature=request["signature"], body=request["body"], url=request["url"]
            )
            print("ok")
        except Exception as error:  # the SDK's SignatureError, or a malformed token
            print(f"refused: {error}")


main()
