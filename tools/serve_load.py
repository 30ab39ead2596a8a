#!/usr/bin/env python3
"""serve_load.py — a load generator for `vkasr serve` (Python standard library only): N concurrent
clients each send requests of random 2-20 s slices of a WAV file and the run prints the throughput (audio
seconds per wall second, RTFx) and the p50/p95 latency. docs/server.md says how to use it."""
import argparse
import http.client
import io
import os
import random
import sys
import threading
import time
import urllib.parse
import uuid
import wave


def wav_slice(frames, params, start, count):
    """The frames [start, start+count) of the source as a WAV file's bytes."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(params.nchannels)
        w.setsampwidth(params.sampwidth)
        w.setframerate(params.framerate)
        size = params.nchannels * params.sampwidth
        w.writeframes(frames[start * size:(start + count) * size])
    return out.getvalue()


def multipart(fields, file_bytes):
    boundary = uuid.uuid4().hex
    parts = []
    for k, v in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
                 f'Content-Type: audio/wav\r\n\r\n'.encode() + file_bytes + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="the server (default %(default)s)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default %(default)s)")
    ap.add_argument("--requests", type=int, default=4, help="requests per client (default %(default)s)")
    ap.add_argument("--audio", default=os.path.join(here, "..", "samples", "sample.wav"),
                    help="a WAV file the requests are cut from (default: samples/sample.wav)")
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--model", default="whisper-1")
    ap.add_argument("--api-key", default=os.environ.get("VKASR_API_KEY"))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    with wave.open(a.audio, "rb") as w:
        params = w.getparams()
        frames = w.readframes(params.nframes)
    rate, total = params.framerate, params.nframes
    rng = random.Random(a.seed)
    jobs = []  # per client: (bytes, seconds)
    for _ in range(a.clients):
        mine = []
        for _ in range(a.requests):
            n = min(total, int(rng.uniform(a.min_seconds, a.max_seconds) * rate))
            start = rng.randint(0, total - n)
            mine.append((wav_slice(frames, params, start, n), n / rate))
        jobs.append(mine)

    u = urllib.parse.urlparse(a.url)
    headers = {"Authorization": f"Bearer {a.api_key}"} if a.api_key else {}
    lat, audio, failures = [], [0.0], []
    lock = threading.Lock()

    def client(mine):
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=3600)
        for data, seconds in mine:
            body, ctype = multipart({"model": a.model, "response_format": "json"}, data)
            t0 = time.monotonic()
            try:
                conn.request("POST", "/v1/audio/transcriptions", body, {**headers, "Content-Type": ctype})
                r = conn.getresponse()
                text = r.read()
                ok, why = r.status == 200, f"HTTP {r.status}: {text[:200]!r}"
            except (OSError, http.client.HTTPException) as e:
                ok, why = False, str(e)
                conn.close()
                conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=3600)
            dt = time.monotonic() - t0
            with lock:
                if ok:
                    lat.append(dt)
                    audio[0] += seconds
                else:
                    failures.append(why)
        conn.close()

    threads = [threading.Thread(target=client, args=(m,)) for m in jobs]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    n = len(lat)
    print(f"{a.clients} clients x {a.requests} requests of {a.min_seconds:g}-{a.max_seconds:g} s: "
          f"{n} ok, {len(failures)} failed")
    print(f"audio {audio[0]:.1f} s in {wall:.2f} s: RTFx {audio[0] / wall:.1f}, {n / wall:.2f} requests/s")
    print(f"latency p50 {percentile(lat, 50):.3f} s, p95 {percentile(lat, 95):.3f} s, "
          f"max {max(lat) if lat else float('nan'):.3f} s")
    for f in failures[:5]:
        print(f"failure: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
