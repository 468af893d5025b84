#!/usr/bin/env python3
"""Strict HTTP/2-over-TLS push server (APNs / FCM v1 look-alike) for interop tests.

    strict_h2_server.py --cert C.pem --key K.pem [--host 127.0.0.1] [--port 0] [--log FILE]
        [--scenario apns] [--raised-limit 500] [--goaway-after 40] [--refuse-every 7]
        [--lower-after 60] [--expect-key-id KEYID] [--delay-ms 0] [--strict-preface]

Prints one line "LISTENING <port>", serves until SIGTERM/SIGINT (exit 0), and appends one
JSON object per event to --log.  Rules for every scenario: ALPN "h2" only, TLS >= 1.2; the
first SETTINGS says MAX_CONCURRENT_STREAMS=1, raised to --raised-limit after the first 200;
a stream beyond the limit the client is bound by gets RST_STREAM(REFUSED_STREAM) and a
"too_many_streams" violation; other protocol errors end the connection with GOAWAY.

h2 4.x quirks worked around:
  * Its own stream-limit check raises TooManyStreamsError, which kills the connection, so
    h2's limit is lifted and the limit is enforced here, per stream.
  * Its Settings treat initial values as already ACKed and pop every pending value on any
    ACK.  Our SETTINGS are written raw (hyperframe); a FIFO of sent limits is popped per ACK.
  * close_connection() forbids any further HEADERS/DATA, so a graceful GOAWAY is raw too.
  * It answers DATA on a stream we reset with RST_STREAM(STREAM_CLOSED); RFC 9113 §5.1 says
    ignore it, so such DATA is swallowed here and only its flow-control credit returned.
  * It parses a whole read before returning events; we feed it one frame at a time so the
    open-stream count is exact and rst-after-response can answer before the DATA is seen.
"""

import argparse
import asyncio
import base64
import binascii
import collections
import itertools
import json
import math
import re
import signal
import ssl
import sys
import time
import uuid

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.errors import ErrorCodes
from h2.settings import SettingCodes, Settings
from hyperframe.frame import DataFrame, GoAwayFrame, SettingsFrame, WindowUpdateFrame

from event_log import EventLog

SCENARIOS = {
    "apns": "the connection rules only",
    "response-on-data": "answers are HEADERS without END_STREAM, ~2 ms later DATA+END_STREAM",
    "rst-after-response": "answer on request HEADERS (END_STREAM), then RST_STREAM(NO_ERROR)",
    "refused": "every --refuse-every'th new stream is reset with REFUSED_STREAM",
    "goaway": "GOAWAY(NO_ERROR) after --goaway-after answers, close ~50 ms after the rest",
    "lower-limit": "every --lower-after answers alternate the limit: 3, --raised-limit, ...",
    "close-mid-burst": "close TCP without GOAWAY after --goaway-after answers",
    "slow": "every answer delayed by --delay-ms (200 ms if not given)",
    "data-after-end-stream": "every answer HEADERS+END_STREAM, then an empty DATA+END_STREAM on the "
                             "ended stream (nginx does when its HEADERS sat in its write queue)",
    "silent": "the first connection stops writing anything (answers, PING ACKs) after --goaway-after "
              "answers, and keeps its socket open; later connections answer as usual",
}
MCS = SettingCodes.MAX_CONCURRENT_STREAMS
H2_SETTINGS_BASE = {SettingCodes.MAX_HEADER_LIST_SIZE: h2.connection.H2Connection.DEFAULT_MAX_HEADER_LIST_SIZE}
LOWERED_LIMIT = 3
APNS_PATH = re.compile(r"/3/device/([^/?]*)")
FCM_PATH = re.compile(r"/v1/projects/([^/?]+)/messages:send")
DEVICE_TOKEN = re.compile(r"[0-9a-fA-F]{64,}")
UUID_FORM = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
CONNECTION_IDS = itertools.count(1)
FCM_MESSAGE_IDS = itertools.count(1)
LIVE = set()


# ---------------------------------------------------------------- request checks

class Request:
    def __init__(self, stream_id, headers):
        self.stream_id = stream_id
        self.h, self.duplicates = {}, set()
        for name, value in headers:
            if name in self.h and not name.startswith(":"):
                self.duplicates.add(name)
            self.h.setdefault(name, value)
        self.method, self.path = self.h.get(":method"), self.h.get(":path", "")
        self.body = bytearray()
        self.task = self.status = self.answer_body = None
        self.token = self.project = None
        if m := APNS_PATH.fullmatch(self.path):
            self.kind, self.token = "apns", m.group(1)
        elif m := FCM_PATH.fullmatch(self.path):
            self.kind, self.project = "fcm", m.group(1)
        else:
            self.kind = "other"


ANSWER_PADDING = 0  # --answer-padding: trailing spaces after every JSON answer


def json_answer(status, obj, extra_headers=()):
    body = json.dumps(obj, separators=(",", ":")).encode() + b" " * ANSWER_PADDING
    return status, [(":status", str(status)), ("content-type", "application/json"),
                    ("content-length", str(len(body))), *extra_headers], body


def b64url_json(segment):
    if "=" in segment:  # JWT segments are unpadded
        raise ValueError("padded segment")
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def provider_token_ok(authorization, expect_kid):
    scheme, _, jwt = authorization.partition(" ")
    if scheme.lower() != "bearer" or jwt.count(".") != 2:
        return False
    head, claims, signature = jwt.split(".")
    try:
        header, payload = b64url_json(head), b64url_json(claims)
    except (ValueError, binascii.Error):
        return False
    return (isinstance(header, dict) and isinstance(payload, dict) and bool(signature)
            and header.get("alg") == "ES256" and (expect_kid is None or header.get("kid") == expect_kid))


def apns_answer(req, opts, have_body):
    h = req.h
    apns_id = h["apns-id"] if UUID_FORM.fullmatch(h.get("apns-id", "")) else str(uuid.uuid4()).upper()

    def fail(status, reason, **extra):
        return json_answer(status, {"reason": reason, **extra}, [("apns-id", apns_id)])

    if req.method != "POST":
        return fail(405, "MethodNotAllowed")
    if not DEVICE_TOKEN.fullmatch(req.token):
        return fail(400, "BadDeviceToken")
    if "authorization" not in h:
        return fail(403, "MissingProviderToken")
    if not provider_token_ok(h["authorization"], opts.expect_key_id):
        return fail(403, "InvalidProviderToken")
    if not h.get("apns-topic"):
        return fail(400, "MissingTopic")
    if not h.get("apns-push-type"):
        return fail(400, "InvalidPushType")
    if req.duplicates:
        return fail(400, "DuplicateHeaders")
    if "apns-id" in h and not UUID_FORM.fullmatch(h["apns-id"]):
        return fail(400, "BadMessageId")
    if h.get("apns-priority", "10") not in ("1", "5", "10"):
        return fail(400, "BadPriority")
    if not h.get("apns-expiration", "0").isdigit():
        return fail(400, "BadExpirationDate")
    if have_body:
        if not req.body:
            return fail(400, "PayloadEmpty")
        if len(req.body) > (5120 if h["apns-push-type"] == "voip" else 4096):
            return fail(413, "PayloadTooLarge")
        try:
            payload = json.loads(req.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return fail(400, "BadPayload")
    if req.token.lower().startswith("dead"):
        return fail(410, "Unregistered", timestamp=int(time.time() * 1000))
    return 200, [(":status", "200"), ("apns-id", apns_id)], b""


def fcm_answer(req, have_body):
    def fail(code, status, message, **extra):
        return json_answer(code, {"error": {"code": code, "message": message, "status": status, **extra}})

    if req.method != "POST":
        return fail(404, "NOT_FOUND", "Method not found.")
    scheme, _, credential = req.h.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return fail(401, "UNAUTHENTICATED", "Request is missing required authentication credential.")
    if have_body:
        try:
            message = json.loads(req.body).get("message")
            req.token = message.get("token")
        except (ValueError, AttributeError):
            return fail(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        if not isinstance(req.token, str) or not req.token:
            return fail(400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
        if req.token.startswith("dead"):
            return fail(404, "NOT_FOUND", "Requested entity was not found.", details=[{
                "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}])
    return json_answer(200, {"name": f"projects/{req.project}/messages/{next(FCM_MESSAGE_IDS)}"})


def answer_for(req, opts, have_body):
    if req.kind == "apns":
        return apns_answer(req, opts, have_body)
    if req.kind == "fcm":
        return fcm_answer(req, have_body)
    return json_answer(404, {"reason": "BadPath"})


# ---------------------------------------------------------------- the connection

class StrictH2Connection(asyncio.Protocol):
    def __init__(self, opts, log):
        self.opts, self.log, self.scenario = opts, log, opts.scenario
        self.delay = opts.delay_ms / 1000
        self.h2 = self.transport = None
        self.closed = self.raised = self.lowered = self.close_scheduled = False
        self.inbuf, self.preface_seen = bytearray(), False
        self.active = {}              # stream id -> Request: streams counting against the limit
        self.reset_by_us = set()      # streams we reset; their DATA is ignored
        self.tasks, self.blocked = set(), []   # delayed answers; bodies waiting for window
        self.sent_limits = collections.deque()  # (MAX_CONCURRENT_STREAMS, read_no) not yet ACKed
        self.acked_limit = None       # None: client hasn't ACKed our first SETTINGS (RFC: unlimited)
        self.read_no = self.closed_this_read = 0
        self.new_streams = self.processed = self.max_processed_id = 0
        self.goaway_last_id = None
        self.silent = False           # silent scenario: nothing more is written on this connection

    # -- plumbing
    def connection_made(self, transport):
        self.transport, self.id = transport, next(CONNECTION_IDS)
        LIVE.add(self)
        self.log("connection", conn=self.id)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            self.log("rejected", conn=self.id, reason="ALPN h2 not negotiated")
            self.closed = True
            transport.close()
            return
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        # initiate_connection() sends local_settings' *current* values; h2 then treats them as
        # in force.  Send MCS=1, then lift h2's own limit (see module docstring).
        self.h2.local_settings = Settings(client=False, initial_values={**H2_SETTINGS_BASE, MCS: self.opts.initial_limit})
        self.h2.initiate_connection()
        self.h2.local_settings = Settings(client=False, initial_values={**H2_SETTINGS_BASE, MCS: 2**31 - 1})
        self.sent_limits.append((self.opts.initial_limit, self.read_no))
        if self.opts.strict_preface:
            self.acked_limit = self.opts.initial_limit
        self.flush()

    def flush(self):
        if self.h2 is not None and not self.closed and (data := self.h2.data_to_send()):
            if not self.silent:
                self.transport.write(data)

    def write_raw(self, frame):
        self.flush()  # keep ordering with whatever h2 has queued
        if not self.closed and not self.silent:
            self.transport.write(frame.serialize())

    def close(self):
        if not self.closed:
            self.flush()
            self.closed = True
            self.transport.close()

    def close_write(self):
        """Stop as a server going away without GOAWAY: FIN after what was written, then whatever
        the client still sends is read and dropped. (Closing at once would reset the connection
        when requests sit unread in the socket, and a reset can destroy answers already sent: the
        client would rightly send those again, and the run would count them twice.)"""
        if not self.closed:
            self.flush()
            self.closed = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
                asyncio.get_running_loop().call_later(2.0, self.transport.close)
            else:
                self.transport.close()

    def connection_lost(self, exc):
        self.closed = True
        LIVE.discard(self)
        for task in self.tasks:
            task.cancel()
        self.log("closed", conn=self.id, processed=self.processed, unanswered=sorted(self.active))

    def log_stream(self, event, req):
        self.log(event, conn=self.id, stream=req.stream_id, path=req.path,
                 apns_id=req.h.get("apns-id"), token=req.token)

    # -- inbound: one frame at a time
    def next_frame_size(self):
        if not self.preface_seen:
            return 24 if len(self.inbuf) >= 24 else None
        if len(self.inbuf) < 9:
            return None
        size = 9 + int.from_bytes(self.inbuf[:3], "big")
        if size - 9 > self.h2.max_inbound_frame_size:
            return len(self.inbuf)  # let h2 reject it with FRAME_SIZE_ERROR
        return size if len(self.inbuf) >= size else None

    def swallowed(self, frame):
        """DATA on a stream we reset: ignore it (RFC 9113 §5.1) but return the credit."""
        stream_id = int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF
        if frame[3] != 0x0 or stream_id not in self.reset_by_us:
            return False
        if len(frame) > 9:
            self.write_raw(WindowUpdateFrame(0, window_increment=len(frame) - 9))
        return True

    def data_received(self, data):
        if self.closed:
            return
        self.inbuf += data
        # Everything in this read was sent before the client could see what we write while
        # handling it: such answers and SETTINGS don't free/raise the limit until next read.
        self.read_no, self.closed_this_read = self.read_no + 1, 0
        try:  # after close-mid-burst the rest of this read is still parsed to log dropped streams
            while (size := self.next_frame_size()) is not None:
                frame = bytes(self.inbuf[:size])
                del self.inbuf[:size]
                if self.preface_seen and self.swallowed(frame):
                    continue
                self.preface_seen = True
                self.handle_events(self.h2.receive_data(frame))
                self.flush()
        except h2.exceptions.ProtocolError as exc:
            # h2 has already queued GOAWAY with the matching error code (PROTOCOL_ERROR mostly).
            kind = "too_many_streams" if isinstance(exc, h2.exceptions.TooManyStreamsError) else "protocol_error"
            self.log("violation", conn=self.id, kind=kind, detail=f"{type(exc).__name__}: {exc}")
            self.close()
        except Exception as exc:  # a bug in this server: record it rather than hang the client
            self.log("internal_error", conn=self.id, detail=repr(exc))
            self.close()
            raise

    def handle_events(self, events):
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                self.on_new_stream(Request(ev.stream_id, ev.headers))
            elif isinstance(ev, h2.events.DataReceived):
                if req := self.active.get(ev.stream_id):
                    req.body += ev.data
                if ev.flow_controlled_length:
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                req = self.active.get(ev.stream_id)
                if req and self.scenario != "rst-after-response":
                    self.schedule(req)
            elif isinstance(ev, h2.events.StreamReset):
                if req := self.active.pop(ev.stream_id, None):
                    if req.task:
                        req.task.cancel()
                    self.log("client_reset", conn=self.id, stream=ev.stream_id, error_code=int(ev.error_code))
            elif isinstance(ev, h2.events.SettingsAcknowledged) and self.sent_limits:
                self.acked_limit = self.sent_limits.popleft()[0]
                self.log("settings_acked", conn=self.id, max_concurrent_streams=self.acked_limit)
            elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                blocked, self.blocked = self.blocked, []  # (INITIAL_WINDOW_SIZE comes as settings)
                for req in blocked:
                    self.send_body(req)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.log("client_goaway", conn=self.id, error_code=int(ev.error_code),
                         last_stream_id=ev.last_stream_id)

    def stream_limit(self):
        """The limit the client is provably bound by.  Lowering binds only once ACKed;
        a raise may legitimately be used as soon as the client has read it."""
        if self.acked_limit is None:
            return math.inf
        return max([self.acked_limit, *(v for v, read_no in self.sent_limits if read_no != self.read_no)])

    def refuse(self, stream_id):
        self.h2.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
        self.reset_by_us.add(stream_id)

    def on_new_stream(self, req):
        if self.closed:  # close-mid-burst, rest of the read
            self.log_stream("dropped_by_close", req)
            return
        if self.goaway_last_id is not None:  # above last_stream_id: never processed
            self.log_stream("dropped_by_goaway", req)
            return
        limit, open_streams = self.stream_limit(), len(self.active) + self.closed_this_read
        if open_streams >= limit:
            self.log("violation", kind="too_many_streams", conn=self.id, stream=req.stream_id,
                     open=open_streams, limit=limit, apns_id=req.h.get("apns-id"))
            self.refuse(req.stream_id)
            return
        self.new_streams += 1
        if self.scenario == "refused" and self.new_streams % self.opts.refuse_every == 0:
            self.log_stream("refused", req)
            self.refuse(req.stream_id)
            return
        self.active[req.stream_id] = req
        if self.scenario == "rst-after-response":
            self.schedule(req)  # from HEADERS alone; with no delay, before any DATA is fed to h2

    # -- outbound
    def schedule(self, req):
        if not self.delay:
            self.respond(req)
            return
        req.task = asyncio.get_running_loop().create_task(self.respond_later(req))
        self.tasks.add(req.task)
        req.task.add_done_callback(self.tasks.discard)

    async def respond_later(self, req):  # one task per delayed answer: answers stay concurrent
        await asyncio.sleep(self.delay)
        self.respond(req)

    def respond(self, req):
        if self.closed or self.silent or self.active.get(req.stream_id) is not req:
            return
        req.status, headers, req.answer_body = answer_for(
            req, self.opts, have_body=self.scenario != "rst-after-response")
        split = self.scenario == "response-on-data"
        self.h2.send_headers(req.stream_id, headers, end_stream=not (req.answer_body or split))
        self.flush()
        if split:  # HEADERS now, DATA + END_STREAM ~2 ms later
            asyncio.get_running_loop().call_later(0.002, self.send_body, req)
        elif req.answer_body:
            self.send_body(req)
        else:
            self.answered(req)

    def send_body(self, req):
        """As much of the body as the client's windows allow, in frames of at most its
        MAX_FRAME_SIZE; the rest waits for its WINDOW_UPDATE."""
        if self.closed or self.active.get(req.stream_id) is not req:
            return
        while True:
            room = min(self.h2.local_flow_control_window(req.stream_id), self.h2.max_outbound_frame_size)
            if req.answer_body and room <= 0:
                self.blocked.append(req)  # retried on WINDOW_UPDATE
                self.flush()
                return
            chunk, req.answer_body = req.answer_body[:room], req.answer_body[room:]
            self.h2.send_data(req.stream_id, chunk, end_stream=not req.answer_body)
            if not req.answer_body:
                break
        self.answered(req)

    def answered(self, req):
        """The final frame is out: now (and only now) the request counts as processed."""
        sid = req.stream_id
        if self.scenario == "data-after-end-stream":
            # A second END_STREAM, on a stream already ended: a protocol slip nginx makes.
            self.write_raw(DataFrame(sid, data=b"", flags=["END_STREAM"]))
        if self.scenario == "rst-after-response":
            try:
                self.h2.reset_stream(sid, ErrorCodes.NO_ERROR)
                self.reset_by_us.add(sid)
            except h2.exceptions.StreamClosedError:
                pass  # the request had already ended: the stream is fully closed
        self.flush()
        del self.active[sid]
        self.closed_this_read += 1
        self.processed += 1
        self.max_processed_id = max(self.max_processed_id, sid)
        self.log("request", conn=self.id, stream=sid, path=req.path, apns_id=req.h.get("apns-id"),
                 token=req.token, status=req.status, hpack_table=self.hpack_table())
        self.after_answer(req.status)

    def hpack_table(self):
        """The names in the client's HPACK dynamic table, as this connection decodes it, newest first."""
        names = (name for name, _ in self.h2.decoder.header_table.dynamic_entries)
        return [name.decode() if isinstance(name, bytes) else name for name in names]

    def send_limit(self, value):
        self.write_raw(SettingsFrame(0, settings={MCS: value}))
        self.sent_limits.append((value, self.read_no))
        self.log("settings_sent", conn=self.id, max_concurrent_streams=value)

    def after_answer(self, status):
        if status == 200 and not self.raised:
            self.raised = True
            self.send_limit(self.opts.raised_limit)
        if self.scenario == "lower-limit" and self.processed % self.opts.lower_after == 0:
            self.lowered = not self.lowered
            self.send_limit(LOWERED_LIMIT if self.lowered else self.opts.raised_limit)
        if self.processed == self.opts.goaway_after:
            if self.scenario == "goaway":
                self.start_goaway()
            elif self.scenario == "close-mid-burst":
                for req in list(self.active.values()):
                    self.drop(req, "dropped_by_close")
                self.close_write()
            elif self.scenario == "silent" and self.id == 1:
                self.silent = True
                self.log("silent", conn=self.id)
        if self.goaway_last_id is not None and not self.active and not self.close_scheduled:
            self.close_scheduled = True
            asyncio.get_running_loop().call_later(0.05, self.close)

    def drop(self, req, event):
        self.active.pop(req.stream_id, None)
        if req.task:
            req.task.cancel()
        self.log_stream(event, req)

    def start_goaway(self):
        last = self.goaway_last_id = self.max_processed_id
        self.write_raw(GoAwayFrame(0, last_stream_id=last, error_code=ErrorCodes.NO_ERROR))
        self.log("goaway_sent", conn=self.id, last_stream_id=last)
        for req in [r for sid, r in self.active.items() if sid > last]:
            self.drop(req, "dropped_by_goaway")
        # Safety net: close even if the client never finishes a stream <= last.
        asyncio.get_running_loop().call_later(5 + 2 * self.delay, self.close)


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                epilog="scenarios:\n" + "\n".join(f"  {k:19} {v}" for k, v in SCENARIOS.items()))
    p.add_argument("--cert", required=True, help="server certificate chain (PEM)")
    p.add_argument("--key", required=True, help="server private key (PEM)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--log", help="append JSON-lines events to this file")
    p.add_argument("--scenario", default="apns", choices=sorted(SCENARIOS))
    p.add_argument("--initial-limit", type=int, default=1,
                   help="MAX_CONCURRENT_STREAMS of the first SETTINGS (APNs: 1 until the first answer)")
    p.add_argument("--raised-limit", type=int, default=500)
    p.add_argument("--goaway-after", type=int, default=40)
    p.add_argument("--refuse-every", type=int, default=7)
    p.add_argument("--lower-after", type=int, default=60)
    p.add_argument("--expect-key-id", help="JWT header kid that APNs requests must carry")
    p.add_argument("--delay-ms", type=int, default=0, help="delay before answering each request")
    p.add_argument("--answer-padding", type=int, default=0,
                   help="trailing spaces after every JSON answer (answers bigger than the client's windows)")
    p.add_argument("--strict-preface", action="store_true",
                   help="enforce MAX_CONCURRENT_STREAMS=1 before the client has ACKed the first "
                        "SETTINGS (stricter than RFC 9113, which allows an early burst)")
    opts = p.parse_args(argv)
    global ANSWER_PADDING
    ANSWER_PADDING = opts.answer_padding
    if opts.scenario == "slow" and opts.delay_ms == 0:
        opts.delay_ms = 200
    return opts


async def serve(opts):
    log = EventLog(opts.log)
    loop = asyncio.get_running_loop()

    def on_loop_error(loop, context):  # failed TLS handshakes are events, not crashes
        if isinstance(context.get("exception"), (ssl.SSLError, ConnectionError)):
            log("tls_error", detail=str(context.get("exception")))
        else:
            loop.default_exception_handler(context)
    loop.set_exception_handler(on_loop_error)

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.load_cert_chain(opts.cert, opts.key)
    tls.set_alpn_protocols(["h2"])
    server = await loop.create_server(lambda: StrictH2Connection(opts, log), opts.host, opts.port, ssl=tls)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)

    stop = asyncio.Event()
    # A parent may start us with these blocked (threads of a test runner often block them);
    # they would then stay pending and we would never stop.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for connection in list(LIVE):
        connection.close()
    await server.wait_closed()
    await asyncio.sleep(0.05)  # let the closes go out


if __name__ == "__main__":
    asyncio.run(serve(parse_args()))
    sys.exit(0)
