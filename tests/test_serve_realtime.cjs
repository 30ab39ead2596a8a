// test_serve_realtime.cjs — the Realtime WebSocket of `vkasr serve` (run by test_serve_live.sh, with
// NODE_PATH at the openai SDK and ws it installed). Every clip is 16 kHz mono PCM16 WAV; EXPECT_DIR holds
// `vkasr transcribe`'s text of clip N as N.txt.
//   node test_serve_realtime.cjs sdk PORT KEY EXPECT_DIR CLIP...      the openai SDK's OpenAIRealtimeWS
//   node test_serve_realtime.cjs many PORT KEY EXPECT_DIR CLIP...     16 sessions at once
//   node test_serve_realtime.cjs bad PORT KEY EXPECT_DIR CLIP...      bad input, then still serving
//   node test_serve_realtime.cjs limits PORT KEY EXPECT_DIR CLIP...   a server with --max-streams 2,
//                                                                     --stream-idle 2, --stream-max-seconds 4
//   node test_serve_realtime.cjs perkey PORT "" EXPECT_DIR            --max-streams-per-key 1, no key
//   node test_serve_realtime.cjs lang PORT KEY EXPECT_DIR CLIP         a language-prompt model: an unknown
//                                                                     language refused, "fr" (EXPECT_DIR/fr.txt)
//   node test_serve_realtime.cjs term PORT KEY EXPECT_DIR CLIP OUT    streams CLIP, writes events to OUT
//                                                                     (the shell sends SIGTERM meanwhile)
'use strict';
const fs = require('fs');
const net = require('net');
const path = require('path');
const WebSocket = require('ws');

const [mode, port, key, expectDir, ...rest] = process.argv.slice(2);
const clips = mode === 'term' ? [rest[0]] : rest;
let failed = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} realtime ${mode}: ${what}`);
  if (!cond) failed++;
}
const expected = (i) => fs.readFileSync(path.join(expectDir, `${i}.txt`), 'utf8').trim();
const URL_ = `ws://127.0.0.1:${port}/v1/realtime?intent=transcription`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* The PCM16 samples of a WAV file (its "data" chunk). */
function pcmOf(file) {
  const b = fs.readFileSync(file);
  for (let off = 12; off + 8 <= b.length;) {
    const id = b.toString('ascii', off, off + 4), size = b.readUInt32LE(off + 4);
    if (id === 'data') return b.subarray(off + 8, off + 8 + size);
    off += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

/* A raw client: collects events; helpers to wait for one. */
function client(opts = {}) {
  const headers = key && !opts.noKey ? { Authorization: `Bearer ${key}` } : {};
  const ws = new WebSocket(opts.url || URL_, opts.protocols || [], { headers: { ...headers, ...(opts.headers || {}) }, maxPayload: 0 });
  const c = { ws, events: [], closed: null, waiters: [] };
  ws.on('message', (m) => {
    const e = JSON.parse(m.toString());
    c.events.push(e);
    c.waiters = c.waiters.filter((w) => !(w.pred(e) && (w.resolve(e), true)));
  });
  ws.on('close', (code, reason) => {
    c.closed = { code, reason: reason.toString() };
    c.waiters.forEach((w) => w.reject(new Error(`closed ${code} ${reason} while waiting for ${w.what}`)));
    c.waiters = [];
  });
  ws.on('error', (e) => { c.error = e; });
  ws.on('unexpected-response', (req, res) => { c.status = res.statusCode; c.closed = { code: -res.statusCode }; ws.emit('close', -res.statusCode, Buffer.from('')); });
  c.open = () => new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('close', () => reject(new Error('not opened'))); });
  c.wait = (pred, what, ms = 30000) => {
    const hit = c.events.find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve, reject, what };
      c.waiters.push(w);
      setTimeout(() => reject(new Error(`timeout waiting for ${what}`)), ms);
    });
  };
  c.waitClose = (ms = 10000) => (c.closed ? Promise.resolve(c.closed) : new Promise((resolve) => {
    ws.on('close', () => resolve(c.closed));
    setTimeout(() => resolve(null), ms);
  }));
  c.send = (o) => ws.send(JSON.stringify(o));
  return c;
}
const isType = (t) => (e) => e.type === t;
const completed = isType('conversation.item.input_audio_transcription.completed');

/* Sends a clip in 100 ms appends (base64 or binary frames), then commits; resolves with the completed event. */
async function transcribe(c, clip, { binary = false, rate = 16000 } = {}) {
  c.send({ type: 'transcription_session.update', session: { input_audio_format: { type: 'audio/pcm', rate }, turn_detection: null } });
  await c.wait(isType('transcription_session.updated'), 'session updated');
  const pcm = pcmOf(clip), step = rate / 10 * 2;
  for (let i = 0; i < pcm.length; i += step) {
    const piece = pcm.subarray(i, i + step);
    if (binary) c.ws.send(piece);
    else c.send({ type: 'input_audio_buffer.append', audio: piece.toString('base64') });
  }
  c.send({ type: 'input_audio_buffer.commit' });
  return c.wait(completed, 'completed', 60000);
}

const deltasOf = (c, item) => c.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === item)
  .map((e) => e.delta).join('');

async function sdk() {
  const OpenAI = require('openai');
  const { OpenAIRealtimeWS } = require('openai/beta/realtime/ws');
  const openai = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${port}/v1` });
  // The SDK always builds a wss:// URL; ws's createConnection option hands it a plain TCP socket, as a
  // TLS-terminating proxy in front of vkasr would.
  const rt = new OpenAIRealtimeWS({ model: 'gpt-4o-transcribe', options: { createConnection: (o) => net.connect(o.port, o.host) } },
    openai);
  const events = [];
  const done = new Promise((resolve, reject) => {
    rt.on('event', (e) => events.push(e));
    rt.on('conversation.item.input_audio_transcription.completed', resolve);
    rt.on('error', (e) => reject(e));
    setTimeout(() => reject(new Error('timeout')), 60000);
  });
  await new Promise((resolve, reject) => { rt.socket.on('open', resolve); rt.socket.on('error', reject); });
  rt.send({ type: 'transcription_session.update', session: { input_audio_format: { type: 'audio/pcm', rate: 16000 },
    input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en' }, turn_detection: null } });
  const pcm = pcmOf(clips[0]);
  for (let i = 0; i < pcm.length; i += 3200)
    rt.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(i, i + 3200).toString('base64') });
  rt.send({ type: 'input_audio_buffer.commit' });
  const c = await done;
  const deltas = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === c.item_id);
  check(events[0].type === 'transcription_session.created' && events.some((e) => e.type === 'transcription_session.updated'),
    'transcription_session.created, then .updated');
  check(events.some((e) => e.type === 'input_audio_buffer.committed' && e.item_id === c.item_id), 'input_audio_buffer.committed names the item');
  check(deltas.length > 0 && deltas.map((e) => e.delta).join('') === c.transcript, `${deltas.length} deltas concatenate to the completed text`);
  const errs = wordErrors(c.transcript, expected(0));
  check(errs <= allowed(expected(0)), `completed ${JSON.stringify(c.transcript)}, offline ${JSON.stringify(expected(0))}: ` +
        (errs ? `${errs} word(s) differ (decided on part of the audio)` : 'equal'));
  check(Array.isArray(c.words) && c.words.map((w) => w.word).join(' ') === c.transcript &&
        c.words.every((w, i) => w.end >= w.start && (i === 0 || w.start >= c.words[i - 1].start)), 'completed carries the words in order, with times');
  check(events.every((e) => typeof e.event_id === 'string'), 'every event has an event_id');
  rt.close();

  // OpenAI's own format: pcm16 at 24 kHz (the clip resampled by linear interpolation), turn detection on,
  // GA event names: the turn ends at the pause after the clip.
  const c2 = client();
  await c2.open();
  c2.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 24000 },
    turn_detection: { type: 'server_vad' } } } } });
  await c2.wait(isType('session.updated'), 'session.updated');
  const s16 = pcmOf(clips[0]), n16 = s16.length / 2, n24 = Math.floor(n16 * 1.5);
  const s24 = Buffer.alloc((n24 + 24000 * 2) * 2); // the clip, then 2 s of silence
  for (let i = 0; i < n24; i++) {
    const x = i / 1.5, k = Math.floor(x), f = x - k;
    const a = s16.readInt16LE(2 * k), b = k + 1 < n16 ? s16.readInt16LE(2 * k + 2) : a;
    s24.writeInt16LE(Math.round(a + (b - a) * f), 2 * i);
  }
  for (let i = 0; i < s24.length; i += 4800) c2.send({ type: 'input_audio_buffer.append', audio: s24.subarray(i, i + 4800).toString('base64') });
  const started = await c2.wait(isType('input_audio_buffer.speech_started'), 'speech_started');
  const stopped = await c2.wait(isType('input_audio_buffer.speech_stopped'), 'speech_stopped');
  const c2done = await c2.wait(completed, 'completed');
  check(started.item_id === c2done.item_id && stopped.item_id === c2done.item_id && stopped.audio_end_ms > started.audio_start_ms,
    `turn detection: speech_started at ${started.audio_start_ms} ms, speech_stopped at ${stopped.audio_end_ms} ms, then completed`);
  const want = expected(0).split(' '), got = c2done.transcript.split(' ');
  const same = got.filter((w, i) => w === want[i]).length;
  check(same >= want.length - 1, `pcm16 at 24 kHz: ${JSON.stringify(c2done.transcript)} (${same} of ${want.length} words as offline at 16 kHz)`);
  c2.ws.close();
}

/* Word-level edit distance. */
function wordErrors(a, b) {
  const x = a.split(' '), y = b.split(' ');
  let prev = y.map((_, j) => j + 1);
  prev.unshift(0);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[y.length];
}

/* Offline models stream through windows, and which windows run depends on when the audio arrives (the
 * server's streams catch up): the text equals the offline one when the whole input is decided in one
 * window, i.e. the commit reaches the stream before its first window starts, and may otherwise differ in
 * a word decided on part of the audio (docs/server.md). Allowed here: one word, or one in ten. */
const allowed = (want) => Math.max(1, Math.floor(want.split(' ').length / 10));

/* 16 sessions at once, each its own clip: its own text. */
async function many() {
  const n = 16;
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: n }, async (_, k) => {
    const i = k % clips.length, c = client();
    await c.open();
    const done = await transcribe(c, clips[i], { binary: k % 2 === 1 });
    c.ws.close();
    return { k, i, text: done.transcript, deltas: deltasOf(c, done.item_id), seconds: pcmOf(clips[i]).length / 32000 };
  }));
  let right = 0, exact = 0;
  for (const r of results) {
    const want = expected(r.i), errs = wordErrors(r.text, want);
    const ok = r.deltas === r.text && errs <= allowed(want);
    right += ok;
    exact += errs === 0;
    if (errs || !ok)
      console.log(`  session ${r.k} (${r.seconds.toFixed(1)} s): ${errs} word(s) from offline: ${JSON.stringify(r.text)} / ${JSON.stringify(want)}`);
  }
  check(right === n, `${n} sessions at once (base64 and binary frames): ${right} right (deltas make the completed text, ` +
        `its clip's offline text within a word), ${exact} equal to it, in ${Date.now() - t0} ms`);
}

async function expectError(what, code, act, message = null) {
  const c = client();
  await c.open();
  await c.wait(isType('transcription_session.created'), 'created');
  act(c);
  try {
    const e = await c.wait(isType('error'), 'error', 10000);
    check(e.error && e.error.code === code && typeof e.error.message === 'string' && 'param' in e.error && 'type' in e.error &&
      (!message || message.test(e.error.message)), `${what}: error ${e.error.code}: ${e.error.message}`);
  } catch (err) {
    check(false, `${what}: ${err.message}`);
  }
  c.ws.close();
}

async function bad() {
  await expectError('not JSON', 'invalid_json', (c) => c.ws.send('{"type": '));
  await expectError('an unknown event', 'unknown_event', (c) => c.send({ type: 'response.create' }));
  await expectError('a wrong audio format', 'invalid_value', (c) => c.send({ type: 'session.update', session: { input_audio_format: 'g711_ulaw' } }));
  await expectError('a rate out of range', 'invalid_value', (c) => c.send({ type: 'session.update', session: { input_audio_format: { type: 'audio/pcm', rate: 96000 } } }));
  await expectError('an odd number of PCM16 bytes', 'invalid_value', (c) => c.ws.send(Buffer.alloc(3)));
  await expectError('bad base64', 'invalid_value', (c) => c.send({ type: 'input_audio_buffer.append', audio: '!!!' }));
  await expectError('an append without audio', 'invalid_value', (c) => c.send({ type: 'input_audio_buffer.append' }));
  await expectError('an empty commit', 'input_audio_buffer_commit_empty', (c) => c.send({ type: 'input_audio_buffer.commit' }));
  {
    // a model without a language prompt takes a language as a hint it cannot follow: the update is accepted
    const c = client();
    await c.open();
    await c.wait(isType('transcription_session.created'), 'created');
    c.send({ type: 'transcription_session.update', session: { input_audio_transcription: { language: 'de' } } });
    try {
      await c.wait(isType('transcription_session.updated'), 'updated', 10000);
      check(true, 'a language for a model without a prompt: accepted');
    } catch (err) {
      check(false, `a language for a model without a prompt: ${err.message}`);
    }
    c.ws.close();
  }
  await expectError('an unknown model', 'model_not_found', (c) => c.send({ type: 'transcription_session.update', session: { input_audio_transcription: { model: 'nope' } } }));

  // a message over --ws-max-message (1 MiB in this server): closed with 1009
  {
    const c = client();
    await c.open();
    c.ws.send(Buffer.alloc(2 << 20));
    const cl = await c.waitClose();
    check(cl && cl.code === 1009, `an oversized message: closed ${cl ? cl.code : 'never'}`);
  }
  // clear: the buffer's audio is dropped, cleared comes, a later commit transcribes only what follows
  {
    const c = client();
    await c.open();
    c.send({ type: 'transcription_session.update', session: { input_audio_format: { type: 'audio/pcm', rate: 16000 }, turn_detection: null } });
    c.ws.send(pcmOf(clips[1]));
    c.send({ type: 'input_audio_buffer.clear' });
    await c.wait(isType('input_audio_buffer.cleared'), 'cleared');
    const done = await transcribe(c, clips[0]);
    check(done.transcript === expected(0), `clear, then a clip: ${JSON.stringify(done.transcript)}`);
    c.ws.close();
  }
  // a client that never reads and one dropped mid-stream, while a good client is served
  const pcm = pcmOf(clips[2]);
  const deaf = client();
  await deaf.open();
  deaf.ws._socket.pause(); // reads nothing from now on
  for (let i = 0; i < 4; i++) deaf.ws.send(pcm);
  const dropped = client();
  await dropped.open();
  dropped.ws.send(pcm.subarray(0, pcm.length >> 1));
  await sleep(200);
  dropped.ws._socket.destroy();
  const good = client();
  await good.open();
  const t0 = Date.now();
  const done = await transcribe(good, clips[0]);
  check(done.transcript === expected(0), `a good client beside one that never reads and one dropped: answered in ${Date.now() - t0} ms`);
  good.ws.close();
  deaf.ws._socket.destroy();
}

async function limits() {
  // --max-streams 2: the third session at once gets an error event and close 1013
  const a = client(), b = client();
  await Promise.all([a.open(), b.open()]);
  await Promise.all([a.wait(isType('transcription_session.created'), 'a'), b.wait(isType('transcription_session.created'), 'b')]);
  const c = client();
  await c.open();
  const e = await c.wait(isType('error'), 'error');
  const cl = await c.waitClose();
  check(e.error.code === 'rate_limit_exceeded' && cl && cl.code === 1013, `a third stream over --max-streams 2: ${e.error.message}, closed ${cl && cl.code}`);
  a.ws.close();
  b.ws.close();
  await Promise.all([a.waitClose(), b.waitClose()]);
  await sleep(300);
  // --stream-idle 2: a silent session is closed with an error event
  const idle = client();
  await idle.open();
  const t0 = Date.now();
  const ie = await idle.wait(isType('error'), 'idle error', 10000);
  const icl = await idle.waitClose();
  check(ie.error.code === 'idle_timeout' && icl && Date.now() - t0 >= 1500, `an idle session: ${ie.error.code} after ${Date.now() - t0} ms, closed ${icl && icl.code}`);
  // --stream-max-seconds 4: a session still sending gets its audio's completed text, then session_expired
  const long = client();
  await long.open();
  long.send({ type: 'transcription_session.update', session: { input_audio_format: { type: 'audio/pcm', rate: 16000 }, turn_detection: null } });
  const lpcm = pcmOf(clips[0]), lt0 = Date.now();
  let off = 0;
  const feed = setInterval(() => { if (long.ws.readyState === WebSocket.OPEN) long.ws.send(lpcm.subarray(off % lpcm.length, off % lpcm.length + 3200)); off += 3200; }, 100);
  try {
    const le = await long.wait(isType('error'), 'session_expired', 15000);
    const lc = long.events.find(completed);
    const lcl = await long.waitClose();
    check(le.error.code === 'session_expired' && lc && lc.transcript.length > 0 && long.events.indexOf(lc) < long.events.indexOf(le) &&
          lcl && lcl.code === 1000, `a session over --stream-max-seconds 4: completed ${JSON.stringify(lc && lc.transcript)}, then ` +
          `${le.error.code} after ${Date.now() - lt0} ms, closed ${lcl && lcl.code}`);
  } finally {
    clearInterval(feed);
  }
  // keys and origins
  const nokey = client({ noKey: true });
  await nokey.waitClose();
  check(nokey.status === 401, `no key: HTTP ${nokey.status}`);
  const qkey = client({ noKey: true, url: `${URL_}&api_key=${encodeURIComponent(key)}` });
  await qkey.open();
  await qkey.wait(isType('transcription_session.created'), '?api_key=');
  check(true, 'the key as ?api_key= (browsers)');
  qkey.ws.close();
  const sub = client({ noKey: true, protocols: ['realtime', `openai-insecure-api-key.${key}`] });
  await sub.open();
  await sub.wait(isType('transcription_session.created'), 'subprotocol key');
  check(sub.ws.protocol === 'realtime', `the key as the subprotocol openai-insecure-api-key.KEY; protocol chosen: ${sub.ws.protocol}`);
  sub.ws.close();
  const evil = client({ headers: { Origin: 'http://evil.example' } });
  await evil.waitClose();
  check(evil.status === 403, `a foreign Origin: HTTP ${evil.status}`);
  const own = client({ headers: { Origin: `http://127.0.0.1:${port}` } });
  await own.open();
  check(true, 'the page\'s own Origin');
  own.ws.close();
  await sleep(300);
}

/* --max-streams-per-key 1 on a server without a key: per client address, the second session is refused. */
async function perkey() {
  const a = client();
  await a.open();
  await a.wait(isType('transcription_session.created'), 'created');
  const b = client();
  await b.open();
  const e = await b.wait(isType('error'), 'error');
  const cl = await b.waitClose();
  check(e.error.code === 'rate_limit_exceeded' && /--max-streams-per-key/.test(e.error.message) && cl && cl.code === 1013,
    `a second stream from one address over --max-streams-per-key 1: ${e.error.message}, closed ${cl && cl.code}`);
  a.ws.close();
  await a.waitClose();
  await sleep(300);
}

/* A language-prompt model: an unknown language is an error naming the model's languages; an ISO-639-1
 * code selects the model's locale of it for the streams that follow. */
async function lang() {
  const update = (language) => ({ type: 'transcription_session.update', session: { input_audio_transcription: { language } } });
  await expectError('an unknown language', 'invalid_value', (c) => c.send(update('xx')), /the model's languages: .*fr-FR/);
  const c = client();
  await c.open();
  c.send(update('fr'));
  await c.wait(isType('transcription_session.updated'), 'session updated');
  const done = await transcribe(c, clips[0]);
  check(done.transcript === expected('fr'), `language fr: ${JSON.stringify(done.transcript)}, the text of --language fr-FR`);
  c.ws.close();
}

async function term() {
  const out = rest[1];
  const c = client();
  await c.open();
  c.send({ type: 'transcription_session.update', session: { input_audio_format: { type: 'audio/pcm', rate: 16000 }, turn_detection: null } });
  c.ws.send(pcmOf(clips[0]));
  fs.writeFileSync(`${out}.sent`, '');
  const cl = await c.waitClose(60000);
  fs.writeFileSync(out, JSON.stringify({ close: cl, events: c.events }));
}

({ sdk, many, bad, limits, perkey, term, lang })[mode]().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log(`FAIL realtime ${mode}: ${e.stack || e}`);
  process.exit(1);
});
