// test_serve_browser.cjs — the page of `vkasr serve` in a real browser: Debian's chromium, headless,
// driven by puppeteer-core (run by test_serve_live.sh with NODE_PATH at the packages it installed).
// The microphone is chromium's fake capture device playing CLIP (a clip then 3 s of silence, looped): a
// completed line of the page must be the offline transcript of the clip. The upload path, with
// format srt, must give the SRT of `vkasr transcribe --format srt`.
//   node test_serve_browser.cjs CHROMIUM PORT CLIP EXPECTED_TEXT_FILE UPLOAD EXPECTED_SRT_FILE
'use strict';
const fs = require('fs');
const puppeteer = require('puppeteer-core');

const [chromium, port, clip, expectedFile, upload, srtFile] = process.argv.slice(2);
const expected = fs.readFileSync(expectedFile, 'utf8').trim();
const expectedSrt = fs.readFileSync(srtFile, 'utf8');
let failed = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} browser: ${what}`);
  if (!cond) failed++;
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
           `--use-file-for-fake-audio-capture=${clip}`, '--autoplay-policy=no-user-gesture-required',
           '--disable-gpu', '--no-first-run', '--disable-extensions'],
  });
  try {
    const page = await browser.newPage();
    const logs = [];
    page.on('console', (m) => logs.push(m.text()));
    page.on('pageerror', (e) => logs.push(`page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => /^model /.test(document.getElementById('status').textContent), { timeout: 10000 });
    check(true, `status line: ${await page.$eval('#status', (e) => e.textContent)}`);

    // the microphone: the capture loops the clip, its first pass from wherever the fake device starts
    // (before the page records, at times), and under load chromium drops some captured audio: one of the
    // first five completed lines is the whole clip
    await page.click('#mic');
    await page.waitForFunction((want) => {
      const lines = [...document.querySelectorAll('#final p[data-completed]')].map((p) => p.textContent);
      return lines.includes(want) || lines.length >= 5;
    }, { timeout: 60000 }, expected);
    const lines = await page.$$eval('#final p[data-completed]', (ps) => ps.map((p) => p.textContent));
    check(lines.includes(expected), `microphone: completed lines ${JSON.stringify(lines)} include the offline ${JSON.stringify(expected)}`);
    await page.click('#mic'); // stop: commit, the last words, close
    await page.waitForFunction(() => document.getElementById('mic-state').textContent === 'stopped', { timeout: 10000 });
    check(true, 'microphone stopped');

    // the upload, as SRT
    const input = await page.$('#file');
    await input.uploadFile(upload);
    await page.select('#format', 'srt');
    await page.click('#go');
    await page.waitForFunction(() => /^done/.test(document.getElementById('upload-state').textContent) ||
                               document.getElementById('upload-state').className === 'err', { timeout: 30000 });
    const srt = await page.$eval('#result', (e) => e.textContent);
    check(srt === expectedSrt, `upload: SRT equal to vkasr transcribe's (${srt.length} bytes)`);
    const dl = await page.$eval('#download', (e) => e.download);
    check(/\.srt$/.test(dl), `upload: download named ${dl}`);
    if (failed)
      console.log(logs.join('\n'));
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log(`FAIL browser: ${e.stack || e}`);
  process.exit(1);
});
