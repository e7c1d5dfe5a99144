"""The HTTP fake of Honcho for the DSH plugin's end-to-end tests (not shipped behaviour).

Run with the repository's Python: `python fake_honcho_server.py`, the accepted API key in the
environment variable `ARTMEM_E2E_HONCHO_KEY`. Prints `{"base_url": ...}` as one JSON line once
listening, then answers one JSON line per line of input: `{"messages": WORKSPACE}` gets that
workspace's messages in insertion order (content, peer, session, metadata). End of input stops
the server.
"""

from __future__ import annotations

import json
import os
import sys

from indexer.testing import FakeHoncho


def main() -> int:
    """Serve until standard input closes."""
    fake = FakeHoncho(api_key=os.environ["ARTMEM_E2E_HONCHO_KEY"])
    with fake.serve() as base_url:
        print(json.dumps({"base_url": base_url}), flush=True)
        for line in sys.stdin:
            workspace = json.loads(line)["messages"]
            messages = [
                {
                    "content": message.content,
                    "peer_id": message.peer_id,
                    "session_id": message.session_id,
                    "metadata": message.metadata,
                }
                for message in fake.messages(workspace)
            ]
            print(json.dumps(messages), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
