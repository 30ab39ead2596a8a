#!/usr/bin/env python3
"""realtime_load.py — a load generator for `vkasr serve`'s Realtime WebSocket (/v1/realtime): N clients
each stream a WAV file at real time (binary PCM16 messages of --chunk-ms, each sent when its last sample
would have been spoken), then commit and wait for the completed transcript. It prints whether real time
held and the delta latency: for each word, the time from sending the message that holds the word's last
sample (its end in the completed event) to the arrival of the delta that carries it. Needs aiohttp
(Debian: python3-aiohttp). docs/server.md says how to use it."""
import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
import wave

import aiohttp


def pcm16_mono(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            sys.exit(f"{path}: needs 16-bit mono PCM")
        return w.getframerate(), w.readframes(w.getnframes())


async def one_stream(session, url, rate, pcm, chunk_ms, start_at, timeout_s):
    """One client. Returns (word latencies in s, lag: how late the last message left, words, error)."""
    per = rate * chunk_ms // 1000 * 2
    pieces = [pcm[i:i + per] for i in range(0, len(pcm), per)]
    deltas = []  # (arrival, number of words)
    completed = None
    async with session.ws_connect(url, max_msg_size=0, heartbeat=None) as ws:
        await ws.send_str(json.dumps({"type": "transcription_session.update", "session": {
            "input_audio_format": {"type": "audio/pcm", "rate": rate}, "turn_detection": None}}))

        async def reader():
            nonlocal completed
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                ev = json.loads(msg.data)
                t = ev.get("type", "")
                if t.endswith("input_audio_transcription.delta"):
                    n = len([w for w in ev.get("delta", "").split(" ") if w])
                    deltas.append((time.monotonic(), n))
                elif t.endswith("input_audio_transcription.completed"):
                    completed = ev
                    return
                elif t == "error":
                    raise RuntimeError(ev.get("error", {}).get("message", "error event"))

        task = asyncio.ensure_future(reader())
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        t0 = time.monotonic()
        lag = 0.0
        for k, piece in enumerate(pieces):
            due = t0 + (k + 1) * chunk_ms / 1000
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            lag = max(lag, time.monotonic() - due)
            await ws.send_bytes(piece)
            if task.done():
                break
        await ws.send_str(json.dumps({"type": "input_audio_buffer.commit"}))
        await asyncio.wait_for(task, timeout_s)
        task.result()
    words = completed.get("words") or [] if completed else []
    lat, i = [], 0
    for arrival, n in deltas:
        for w in words[i:i + n]:
            sent = t0 + (int(w["end"] * 1000 // chunk_ms) + 1) * chunk_ms / 1000
            lat.append(arrival - sent)
        i += n
    return lat, lag, len(words)


async def clients(args, n, start_at):
    rate, pcm = pcm16_mono(args.audio)
    pcm = pcm[:int(args.seconds * rate) * 2] if args.seconds else pcm
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as s:
        runs = [one_stream(s, args.url, rate, pcm, args.chunk_ms, start_at + k * args.ramp / max(1, args.clients),
                           args.timeout) for k in range(n)]
        return await asyncio.gather(*runs, return_exceptions=True)


def worker(args, n, start_at, q):
    out = asyncio.run(clients(args, n, start_at))
    q.put([r if not isinstance(r, BaseException) else repr(r) for r in out])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="ws://127.0.0.1:8080/v1/realtime?intent=transcription")
    ap.add_argument("--audio", required=True, help="16-bit mono WAV (any rate from 8 to 48 kHz)")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=0, help="stream only the first S seconds of the file")
    ap.add_argument("--chunk-ms", type=int, default=80, help="audio per message (default 80)")
    ap.add_argument("--ramp", type=float, default=2.0, help="spread the clients' starts over S seconds")
    ap.add_argument("--procs", type=int, default=0, help="client processes (default: one per 128 clients)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for completed after commit")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    procs = max(1, min(args.clients, args.procs or (args.clients + 127) // 128))
    start_at = time.monotonic() + 1.0
    q = multiprocessing.Queue()
    share = [args.clients // procs + (k < args.clients % procs) for k in range(procs)]
    ps = [multiprocessing.Process(target=worker, args=(args, n, start_at, q)) for n in share]
    for p in ps:
        p.start()
    results = [r for _ in ps for r in q.get()]
    for p in ps:
        p.join()
    errors = [r for r in results if isinstance(r, str)]
    ok = [r for r in results if not isinstance(r, str)]
    lat = sorted(x for r in ok for x in r[0])
    lags = sorted(r[1] for r in ok)

    def pct_ms(v, p):  # None (JSON null) without words: a model that wrote none gives no latency
        return round(v[min(len(v) - 1, int(p / 100 * len(v)))] * 1000, 1) if v else None
    rep = {"clients": args.clients, "completed": len(ok), "errors": len(errors), "words": len(lat),
           "delta_ms_p50": pct_ms(lat, 50), "delta_ms_p95": pct_ms(lat, 95),
           "delta_ms_max": round(lat[-1] * 1000, 1) if lat else None,
           "send_lag_ms_max": round(lags[-1] * 1000, 1) if lags else None,
           "chunk_ms": args.chunk_ms,
           "mean_words": round(statistics.mean(r[2] for r in ok), 1) if ok else 0}
    if args.json:
        print(json.dumps(rep))
    else:
        print(f"{rep['clients']} clients: {rep['completed']} completed, {rep['errors']} errors; "
              f"delta latency p50 {rep['delta_ms_p50']} ms, p95 {rep['delta_ms_p95']} ms, max {rep['delta_ms_max']} ms "
              f"over {rep['words']} words; sends at most {rep['send_lag_ms_max']} ms late")
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
