"""An ASGI app that answers an OpenAI-style chat request with an SSE stream, for hypercorn in
tests/repo/http2.rs (served over cleartext HTTP/2 with prior knowledge).

  GET  /v1/models              200, a models list naming "mock"
  POST /v1/chat/completions    200, max_tokens events of one token each, 5 ms apart, then a usage
                               event and [DONE]
  POST /v1/fail                the same, but the app raises after its second event (hypercorn
                               then closes the connection under the open stream)
"""
import asyncio
import json


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/v1/models":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({"data": [{"id": "mock"}]}).encode()})
        return
    tokens = int(json.loads(body or b"{}").get("max_tokens", 4))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    for i in range(tokens):
        if scope["path"] == "/v1/fail" and i == 2:
            raise RuntimeError("the app failed mid-stream")
        chunk = {"model": "mock", "choices": [{"index": 0, "delta": {"content": "t"}}]}
        await send({"type": "http.response.body", "more_body": True,
                    "body": b"data: " + json.dumps(chunk).encode() + b"\n\n"})
        await asyncio.sleep(0.005)
    usage = {"model": "mock", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": tokens}}
    await send({"type": "http.response.body", "more_body": False,
                "body": b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"})
