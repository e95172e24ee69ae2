#!/usr/bin/env python3
"""Loopback load test for an OpenAI-compatible server (dlm api, or any other):
C concurrent clients x R streaming chat requests each, bounded in count and
time. Counts errors, and measures total generated tokens/s, time to first
token (TTFT) and per-token latency (gaps between content chunks).

usage: load.py URL [--clients 16] [--requests 8] [--max-tokens 32] [--model ID]
                   [--endpoint chat|completions]
Generated tokens are the server's usage.completion_tokens (stream_options
include_usage); a server that sends no usage has its content chunks counted
instead ("usage_missing" says how many requests that was).
Prints one JSON object. Standard library only."""
import argparse, http.client, json, statistics, sys, threading, time, urllib.parse

QUESTIONS = ["What is the capital of France?", "Tell me about the water cycle.", "What is a cloud?",
             "Name a large river.", "How do bees make honey?", "What is photosynthesis?",
             "Why is the sky blue?", "What is a prime number?"]


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def one(u, model, q, max_tokens, timeout, endpoint):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = {"stream": True, "max_tokens": max_tokens, "temperature": 0.8, "seed": 1,
            "stream_options": {"include_usage": True}}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": q}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = q
        path = "/v1/completions"
    if model:
        body["model"] = model
    t0 = time.monotonic()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    first, stamps, usage, done, buf = None, [], None, False, b""
    while not done:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: "):
                raise RuntimeError(f"bad SSE event {ev[:80]!r}")
            data = ev[6:]
            if data == b"[DONE]":
                done = True
                break
            j = json.loads(data)
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                text = ch["delta"].get("content") if "delta" in ch else ch.get("text")
                if text:
                    now = time.monotonic()
                    if first is None:
                        first = now - t0
                    stamps.append(now)
    c.close()
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    if usage is None:
        return first, gaps, len(stamps), 1
    return first, gaps, usage.get("completion_tokens", 0), 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--model")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    ttft, gaps, errors, tokens, no_usage = [], [], [], [0], [0]
    lock = threading.Lock()

    def client(k):
        for i in range(a.requests):
            try:
                f, g, n, nu = one(u, a.model, QUESTIONS[(k + i) % len(QUESTIONS)], a.max_tokens, a.timeout,
                                  a.endpoint)
                with lock:
                    no_usage[0] += nu
                    if f is not None:
                        ttft.append(f)
                    gaps.extend(g)
                    tokens[0] += n
            except Exception as e:  # counted, not fatal: the run reports them
                with lock:
                    errors.append(str(e)[:200])

    t0 = time.monotonic()
    th = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    ms = lambda x: None if x is None else round(1000 * x, 1)
    print(json.dumps({
        "clients": a.clients, "requests": a.clients * a.requests, "errors": len(errors),
        "error_samples": errors[:3], "wall_s": round(wall, 2), "completion_tokens": tokens[0],
        "usage_missing": no_usage[0],
        "tokens_per_s": round(tokens[0] / wall, 1),
        "ttft_ms_p50": ms(pct(ttft, 50)), "ttft_ms_p99": ms(pct(ttft, 99)),
        "token_ms_p50": ms(pct(gaps, 50)), "token_ms_p99": ms(pct(gaps, 99)),
    }))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
