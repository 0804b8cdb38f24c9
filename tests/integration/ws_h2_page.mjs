// SPDX-License-Identifier: MIT
// ws_h2_page.mjs CHROMIUM PAGE_URL WS_URL: headless Chromium loads PAGE_URL (over TLS, which
// opens its HTTP/2 connection), then opens a WebSocket to WS_URL from that page, sends two
// messages and prints, as its last line, the JSON of what came back; exits 1 with the step that
// failed. Driven through the DevTools protocol (run with node --experimental-websocket).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [chromium, pageUrl, wsUrl] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), 'm0-chromium-'));
const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--disable-dev-shm-usage', '--remote-debugging-port=0',
  '--ignore-certificate-errors', `--user-data-dir=${profile}`, 'about:blank'],
{ stdio: ['ignore', 'ignore', 'pipe'] });

let ws;
let next = 0;
const waiting = new Map();
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = ++next;
  waiting.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`))
    : resolve(m.result)));
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expression) => {
  const r = await send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
  const x = r.exceptionDetails;
  if (x) throw new Error(`${expression}: ${x.exception ? x.exception.description : x.text}`);
  return r.result.value;
};

let code = 0;
try {
  const devtools = await new Promise((resolve, reject) => {
    let err = '';
    browser.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    browser.on('exit', () => reject(new Error(`chromium exited: ${err}`)));
  });
  const port = new URL(devtools).port;
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  ws = new WebSocket(targets.find((t) => t.type === 'page').webSocketDebuggerUrl);
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.id && waiting.has(m.id)) {
      waiting.get(m.id)(m);
      waiting.delete(m.id);
    }
  };
  await new Promise((resolve) => { ws.onopen = resolve; });
  await send('Page.enable');
  await send('Page.navigate', { url: pageUrl });
  for (let i = 0; i < 200 && (await evaluate('document.readyState')) !== 'complete'; i++)
    await new Promise((resolve) => setTimeout(resolve, 50));
  const got = await evaluate(`new Promise((resolve) => {
    const w = new WebSocket(${JSON.stringify(wsUrl)});
    const got = [];
    w.binaryType = 'arraybuffer';
    w.onopen = () => { w.send('hello over h2'); w.send(new Uint8Array([0, 1, 255])); };
    w.onmessage = (e) => {
      got.push(typeof e.data === 'string' ? e.data : [...new Uint8Array(e.data)]);
      if (got.length === 2) w.close(1000, 'done');
    };
    w.onclose = (e) => resolve({ got, code: e.code, reason: e.reason, clean: e.wasClean });
    setTimeout(() => resolve({ got, timeout: true }), 10000);
  })`);
  console.log(JSON.stringify(got));
} catch (e) {
  console.log(`failed: ${e.message}`);
  code = 1;
} finally {
  browser.kill('SIGKILL');
  await new Promise((resolve) => { if (browser.exitCode !== null) resolve(); else browser.on('exit', resolve); });
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
