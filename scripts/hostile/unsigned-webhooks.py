#!/usr/bin/env python3
"""Unsigned webhooks to random paths against a running server: its RSS and log growth.

    scripts/hostile/unsigned-webhooks.py --url http://127.0.0.1:8080 --pid <serve pid> --log <its log file> [--count 20000]

Half the posts go to 16 KB of random hex, half to account-shaped ids that do not exist; every
answer must be 403. Prints the server's RSS before and after (from /proc) and the log lines written.
"""
import argparse, concurrent.futures, http.client, os, random, string, urllib.parse

from serverstats import rss_mib

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

def lines(path):
    with open(path, "rb") as log:
        return sum(1 for _ in log)

def worker(url, count, seed):
    rng = random.Random(seed)
    parsed = urllib.parse.urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    statuses = {}
    for index in range(count):
        if index % 2 == 0:
            account = "%016x" % rng.getrandbits(64) * 1024
        else:
            account = "acc_" + "".join(rng.choice(ALPHABET) for _ in range(26))
        provider = "webex" if index % 3 == 0 else "twilio"
        body = b'{"twi_message_id":"x"}'
        connection.request("POST", f"/v1/webhooks/{provider}/{account}", body=body,
                           headers={"Content-Type": "application/json", "X-Twilio-Signature": "bm90IGEgc2lnbmF0dXJl"})
        response = connection.getresponse()
        response.read()
        statuses[response.status] = statuses.get(response.status, 0) + 1
    return statuses

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    rss_before, lines_before = rss_mib(args.pid), lines(args.log)
    per_worker = args.count // args.workers
    totals = {}
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        for statuses in pool.map(lambda seed: worker(args.url, per_worker, seed), range(args.workers)):
            for status, count in statuses.items():
                totals[status] = totals.get(status, 0) + count
    print(f"posts        {per_worker * args.workers}, answers {dict(sorted(totals.items()))}")
    print(f"server RSS   {rss_before:.0f} MiB before, {rss_mib(args.pid):.0f} MiB after")
    print(f"log          {lines(args.log) - lines_before} lines written")

if __name__ == "__main__":
    main()
