// test_serve_openai.cjs — the official OpenAI Node SDK against `vkasr serve` (run by test_serve.sh, with
// NODE_PATH at the SDK it installed): every response_format, stream: true, a wrong key, undecodable audio.
//   node test_serve_openai.cjs PORT API_KEY AUDIO EXPECTED_TEXT_FILE NOT_AUDIO SEGMENTS_AUDIO SEGMENTS_TEXT_FILE
// (SEGMENTS_AUDIO: audio of several segments, SEGMENTS_TEXT_FILE its offline transcript)
'use strict';
const fs = require('fs');
const OpenAI = require('openai');

const [port, key, audio, expectedFile, notAudio, segAudio, segTextFile] = process.argv.slice(2);
const expected = fs.readFileSync(expectedFile, 'utf8').trim();
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });
let failed = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} sdk: ${what}`);
  if (!cond) failed++;
}
const create = (params) => client.audio.transcriptions.create({ file: fs.createReadStream(audio), model: 'whisper-1', ...params });

async function main() {
  const models = await client.models.list();
  check(models.data.length === 1 && typeof models.data[0].id === 'string', `models.list: ${JSON.stringify(models.data)}`);

  const json = await create({});
  check(json.text === expected, `json (default): ${JSON.stringify(json.text)}`);
  const text = await create({ response_format: 'text' });
  check(typeof text === 'string' && text.trim() === expected, `text: ${JSON.stringify(text)}`);
  const srt = await create({ response_format: 'srt' });
  check(typeof srt === 'string' && /^1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n/.test(srt), 'srt: a first cue');
  const vtt = await create({ response_format: 'vtt' });
  check(typeof vtt === 'string' && /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d{3} --> /.test(vtt), 'vtt: the header and a cue');
  const verbose = await create({ response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'],
                                 language: 'en', prompt: 'ignored', temperature: 0 });
  check(verbose.text === expected && verbose.duration > 0 && verbose.language === 'en', 'verbose_json: text, duration, language');
  check(Array.isArray(verbose.segments) && verbose.segments.length > 0 && Array.isArray(verbose.words) &&
        verbose.words.map((w) => w.word).join(' ') === expected, 'verbose_json: segments, words making the text');
  const seg = await create({ response_format: 'verbose_json' });
  check(Array.isArray(seg.segments) && seg.words === undefined, 'verbose_json without word granularity: segments only');

  // stream: true: the SDK's Stream of server-sent events, deltas then done
  for (const response_format of ['text']) {
    const stream = await client.audio.transcriptions.create({ file: fs.createReadStream(segAudio), model: 'gpt-4o-transcribe',
                                                              stream: true, response_format });
    const events = [];
    for await (const ev of stream) events.push(ev);
    const done = events.pop(), deltas = events.map((e) => e.delta).join('');
    const segText = fs.readFileSync(segTextFile, 'utf8').trim();
    check(events.length >= 2 && events.every((e) => e.type === 'transcript.text.delta'), `stream (${response_format}): ${events.length} deltas`);
    check(done && done.type === 'transcript.text.done' && done.text === segText && deltas === segText,
          `stream (${response_format}): the deltas make the done text, the offline transcript: ${JSON.stringify(done)}`);
  }
  try {
    await create({ stream: true, response_format: 'srt' });
    check(false, 'stream with srt is refused');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'stream', `stream with srt: ${e.status} ${e.message}`);
  }

  try {
    await new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 }).audio.transcriptions.create(
      { file: fs.createReadStream(audio), model: 'whisper-1' });
    check(false, 'a wrong key is refused');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, `a wrong key: ${e.status} ${e.message}`);
  }
  try {
    await client.audio.transcriptions.create({ file: fs.createReadStream(notAudio), model: 'whisper-1' });
    check(false, 'not audio is refused');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'file', `not audio: ${e.status} ${e.message}`);
  }
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log(`FAIL sdk: ${e.stack || e}`);
  process.exit(1);
});
