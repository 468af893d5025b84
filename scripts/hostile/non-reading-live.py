#!/usr/bin/env python3
"""Live devices that never read: what each costs a running server, and whether it is closed.

    scripts/hostile/non-reading-live.py --url http://127.0.0.1:8080 --pid <serve pid> --admin-token <token> \
        [--devices 200] [--seconds 20]

Each device opens /v1/connect with its own access token, then sends 15 KB
`{"type":"ping","<junk field>":1}` frames as fast as the socket takes them and reads nothing, so
the server's pongs and error frames pile up on its side. Prints the server's RSS before, at the
peak and after, the cost per device, and how many connections the server closed (1008).
"""
import argparse, base64, http.client, json, os, socket, struct, threading, time, urllib.parse

from serverstats import rss_mib

def api(url, method, path, token, body=None):
    parsed = urllib.parse.urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    connection.request(method, path, body=json.dumps(body) if body is not None else None,
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    if response.status >= 300:
        raise SystemExit(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data)

def masked_text_frame(payload):
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    length = len(payload)
    header = bytes([0x81]) + (bytes([0x80 | 126]) + struct.pack("!H", length) if length < 65536 else bytes([0x80 | 127]) + struct.pack("!Q", length))
    return header + mask + masked

def device(url, token, frame, seconds, results, index):
    parsed = urllib.parse.urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=10)
    # Small buffers on our side: the backlog builds up in the server, not in our kernel.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /v1/connect HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                  f"Authorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            results[index] = "refused"
            return
        head += chunk
    if b" 101 " not in head.split(b"\r\n")[0]:
        results[index] = "refused"
        return
    sock.settimeout(1)
    deadline = time.monotonic() + seconds
    outcome = "open"
    while time.monotonic() < deadline:
        try:
            sock.send(frame)
        except socket.timeout:
            continue  # the server stopped reading us: keep trying until it closes
        except OSError:
            outcome = "closed"
            break
    results[index] = outcome
    time.sleep(seconds)  # hold whatever is left until the measurement is done
    sock.close()

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--admin-token", required=True)
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    account = api(args.url, "POST", "/v1/accounts", args.admin_token, {"name": f"non-reading-{os.getpid()}"})
    tokens = [api(args.url, "POST", "/v1/access-tokens", account["apiKey"], {"identity": "hostile", "deviceId": f"d{index}"})["token"]
              for index in range(args.devices)]
    frame = masked_text_frame(json.dumps({"type": "ping", "x" * 15000: 1}).encode())
    rss_before = rss_mib(args.pid)
    results = [None] * args.devices
    threads = [threading.Thread(target=device, args=(args.url, token, frame, args.seconds, results, index), daemon=True)
               for index, token in enumerate(tokens)]
    for thread in threads:
        thread.start()
    peak = rss_before
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mib(args.pid))
        time.sleep(0.2)
    rss_at_end = rss_mib(args.pid)
    for thread in threads:
        thread.join()
    time.sleep(1)
    closed = sum(1 for result in results if result == "closed")
    print(f"devices      {args.devices} non-reading for {args.seconds:.0f} s; closed by the server: {closed}, "
          f"still open: {sum(1 for r in results if r == 'open')}, refused: {sum(1 for r in results if r == 'refused')}")
    print(f"server RSS   {rss_before:.0f} MiB before, {peak:.0f} MiB peak, {rss_at_end:.0f} MiB at the end, "
          f"{rss_mib(args.pid):.0f} MiB after they left")
    print(f"per device   {(peak - rss_before) / args.devices * 1024:.0f} KiB at the peak")

if __name__ == "__main__":
    main()
