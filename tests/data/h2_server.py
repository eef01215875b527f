#!/usr/bin/env python3
"""A cleartext HTTP/2 server (prior knowledge) that does, on cue, what real servers do only under
load: for tests/repo/http2.rs. Built on the `h2` library that hypercorn uses (pip install
hypercorn brings it); no ASGI app, so each frame is the one named here.

  GET  /v1/models              200, a models list naming "mock"
  POST /v1/chat/completions    200, an SSE stream of 3 events, usage, [DONE]; but on each
                               connection, a request on stream 5 or later gets a GOAWAY
                               (NO_ERROR, last stream id 3) instead, so it was never processed
  POST /refuse                 RST_STREAM REFUSED_STREAM
  POST /big-header             200 with a 100 KB header (over the client's pinned 64 KiB cap)

With "stall" after the port, it instead grants every stream a flow-control window of 16 bytes
and never more, and answers nothing: a request body longer than that stalls in the client.

With "stall-one", every stream starts with a window of 16 bytes and is granted 1 MiB more when
its request arrives, except on one connection: the first to carry a chat completion, whose
windows never open (its streams stall as under "stall"). Chat completions are answered and no
GOAWAY is sent, so a client that keeps new requests off the stalled connection completes them.

With "flood" and a count N, a chat completion is answered only after N PING frames on its
connection (no GOAWAY is sent).

With "goaway-answered", a chat completion gets its HEADERS (200) and its first event, then a
GOAWAY whose last stream id is 0, and the connection closes: a server that answered a stream and
then said it processed none.

Usage: python3 h2_server.py PORT [stall | stall-one | flood N | goaway-answered]
(prints "ready" once it listens; serves until killed)
"""
import json
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

LAST_PROCESSED = 3


def sse():
    chunk = {"model": "mock", "choices": [{"index": 0, "delta": {"content": "t"}}]}
    usage = {"model": "mock", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
    events = ["data: " + json.dumps(chunk) + "\n\n"] * 3
    events.append("data: " + json.dumps(usage) + "\n\ndata: [DONE]\n\n")
    return "".join(events).encode()


MODE = sys.argv[2] if len(sys.argv) > 2 else ""
STALL = MODE == "stall"
STALL_ONE = MODE == "stall-one"
FLOOD = int(sys.argv[3]) if MODE == "flood" else 0
GOAWAY_ANSWERED = MODE == "goaway-answered"
stalled = {"connection": None}
stalled_lock = threading.Lock()


def serve(sock):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    if STALL or STALL_ONE:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16})
    sock.sendall(conn.data_to_send())
    paths = {}
    gone = False
    while True:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                paths[event.stream_id] = dict(event.headers)[":path"]
                if STALL_ONE:
                    with stalled_lock:
                        if stalled["connection"] is None and paths[event.stream_id] == "/v1/chat/completions":
                            stalled["connection"] = id(conn)
                        opens = stalled["connection"] != id(conn)
                    if opens:
                        conn.increment_flow_control_window(1 << 20, stream_id=event.stream_id)
            elif isinstance(event, h2.events.DataReceived):
                if not STALL and not (STALL_ONE and stalled["connection"] == id(conn)):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                stream, path = event.stream_id, paths.pop(event.stream_id, "")
                if gone:
                    continue
                if path == "/big-header":
                    conn.send_headers(stream, [(":status", "200"), ("x-big", "b" * 100_000)], end_stream=True)
                elif path == "/refuse":
                    conn.reset_stream(stream, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
                elif path == "/v1/models":
                    body = json.dumps({"data": [{"id": "mock"}]}).encode()
                    conn.send_headers(stream, [(":status", "200"), ("content-type", "application/json")])
                    conn.send_data(stream, body, end_stream=True)
                elif GOAWAY_ANSWERED:
                    conn.send_headers(stream, [(":status", "200"), ("content-type", "text/event-stream")])
                    conn.send_data(stream, sse().split(b"\n\n")[0] + b"\n\n", end_stream=False)
                    conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=0)
                    gone = True
                elif stream > LAST_PROCESSED and not STALL_ONE and not FLOOD:
                    conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=LAST_PROCESSED)
                    gone = True
                else:
                    for n in range(FLOOD):
                        conn.ping(n.to_bytes(8, "big"))
                        if n % 1000 == 999:
                            sock.sendall(conn.data_to_send())
                    conn.send_headers(stream, [(":status", "200"), ("content-type", "text/event-stream")])
                    conn.send_data(stream, sse(), end_stream=True)
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
        if gone and not paths:
            break
    sock.close()


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen(64)
    print("ready", flush=True)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()
