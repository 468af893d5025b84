#!/usr/bin/env python3
"""Connections that hang around: how long a running server keeps each kind open.

    scripts/hostile/slow-connections.py --url http://127.0.0.1:8080 [--each 100] [--give-up 200]

Opens `--each` silent sockets (connect, send nothing), `--each` with half-sent headers,
`--each` that send a request's headers and half its body, then nothing, and `--each` that send
a request's headers, then a byte of body every 5 s (which restarts an idle timeout every time);
and waits for the server to close them. Prints, per kind, how many it closed and when (min, median,
max seconds after connecting); `--give-up` bounds the wait.
"""
import argparse, selectors, socket, statistics, time, urllib.parse

def open_kind(host, port, kind):
    sock = socket.create_connection((host, port), timeout=10)
    if kind == "half headers":
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    elif kind == "half body":
        sock.sendall(b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":")
    elif kind == "trickled body":
        sock.sendall(b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    sock.setblocking(False)
    return sock

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--each", type=int, default=100)
    parser.add_argument("--give-up", type=float, default=200)
    args = parser.parse_args()
    parsed = urllib.parse.urlparse(args.url)
    selector = selectors.DefaultSelector()
    kinds = ["silent", "half headers", "half body", "trickled body"]
    started = time.monotonic()
    trickling = []
    for kind in kinds:
        for _ in range(args.each):
            sock = open_kind(parsed.hostname, parsed.port, kind)
            selector.register(sock, selectors.EVENT_READ, kind)
            if kind == "trickled body":
                trickling.append(sock)
    last_trickle = time.monotonic()
    closed = {kind: [] for kind in kinds}
    answered = {kind: 0 for kind in kinds}
    open_count = len(kinds) * args.each
    while open_count and time.monotonic() - started < args.give_up:
        if time.monotonic() - last_trickle >= 5:
            last_trickle = time.monotonic()
            for sock in trickling:
                try:
                    sock.send(b" ")
                except OSError:
                    pass
        for key, _ in selector.select(timeout=0.5):
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, OSError):
                data = b""
            if data:
                answered[key.data] += 1  # an error answer before the close (408/400): keep reading
                continue
            closed[key.data].append(time.monotonic() - started)
            selector.unregister(sock)
            if sock in trickling:
                trickling.remove(sock)
            sock.close()
            open_count -= 1
    for kind in kinds:
        times = closed[kind]
        if times:
            print(f"{kind:13} {len(times)}/{args.each} closed, after {min(times):.1f} / {statistics.median(times):.1f} / "
                  f"{max(times):.1f} s (min / median / max); {answered[kind]} got an answer first")
        else:
            print(f"{kind:13} 0/{args.each} closed within {args.give_up:.0f} s")

if __name__ == "__main__":
    main()
