"""How often a SUBSCRIBE response's head reaches a client without the SUBSCRIBED record.

pymesos takes itself as subscribed once it has parsed the head's ``Mesos-Stream-Id`` and asserts that it
knows its framework id before any call; a head read alone lets a call made at once (``pymesos.subprocess``
revives offers right after starting its driver) fail inside pymesos. One
:class:`~elastic.front.mesos.MesosServer` on ``Elastic(LocalBackend(cores=2), "perstage")``; ``--runs``
times, a raw socket subscribes and reads once: counted when that read holds the head and not SUBSCRIBED.

    .venv/bin/python benchmarks/bench_mesos_subscribe_head.py [--runs 200]
"""

from __future__ import annotations

import argparse
import json
import socket

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer


def main() -> None:
    """Subscribe ``--runs`` times and print how many first reads had the head without SUBSCRIBED."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "h"}}})
    request = (
        b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body.encode())
    )
    alone = 0
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False) as el,
        MesosServer(el) as server,
    ):
        host, port = server.address.split(":")
        for _ in range(args.runs):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(request)
                first = sock.recv(65536)
                alone += b"\r\n\r\n" in first and b'"SUBSCRIBED"' not in first
    print(f"head without SUBSCRIBED in the first read: {alone} of {args.runs}")


if __name__ == "__main__":
    main()
