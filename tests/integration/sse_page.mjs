// SPDX-License-Identifier: MIT
// sse_page.mjs CHROMIUM URL SPKI N [FLAG...]: headless Chromium, told to accept the certificate
// whose public key hashes to SPKI (base64 SHA-256, --ignore-certificate-errors-spki-list) and
// to resolve a.test to 127.0.0.1, loads URL (an https page of counter's), then on that page
// opens N EventSources to its /events and, once all are open, asks GET / and POST /increment
// with fetch() while they stay open; each EventSource must then receive the event that POST
// made. FLAGs go to Chromium as they are (--disable-http2: HTTP/1.1 over TLS). Drives it through
// the DevTools protocol (run with node --experimental-websocket) and prints, as its last line,
// the JSON of what the page saw and of every response the Network domain reported (url, status,
// protocol, connectionId); exits 1 with the step that failed.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [chromium, url, spki, n, ...flags] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), 'm0-chromium-'));
const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--disable-dev-shm-usage', '--remote-debugging-port=0',
  `--user-data-dir=${profile}`, `--ignore-certificate-errors-spki-list=${spki}`,
  '--host-resolver-rules=MAP a.test 127.0.0.1', ...flags, 'about:blank'],
{ stdio: ['ignore', 'ignore', 'pipe'] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let ws;
let next = 0;
const waiting = new Map();
const responses = [];
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = ++next;
  waiting.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`))
    : resolve(m.result)));
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expression) => {
  const r = await send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
  const x = r.exceptionDetails;
  if (x) throw new Error(`${expression.slice(0, 80)}: ${x.exception ? x.exception.description : x.text}`);
  return r.result.value;
};

// Runs in the page: N EventSources, then the two fetches while they are open, then every
// source's first `value` event; rejects after 20 s with what is missing.
const PAGE = `(async () => {
  const n = ${Number(n)};
  const got = new Array(n).fill(null);
  const sources = [];
  let opened = 0;
  let onAllOpen;
  const allOpen = new Promise((resolve) => { onAllOpen = resolve; });
  let onAllGot;
  const allGot = new Promise((resolve) => { onAllGot = resolve; });
  let received = 0;
  for (let i = 0; i < n; i++) {
    const es = new EventSource('/events');
    es.onopen = () => { if (++opened === n) onAllOpen(); };
    es.addEventListener('value', (e) => {
      if (got[i] === null) {
        got[i] = [e.lastEventId, e.data];
        if (++received === n) onAllGot();
      }
    });
    sources.push(es);
  }
  const late = (what) => new Promise((_, reject) => setTimeout(
    () => reject(new Error(what + ': ' + opened + ' open, ' + received + ' events')), 20000));
  await Promise.race([allOpen, late('the sources did not open')]);
  const index = await fetch('/');
  const indexBody = await index.text();
  const post = await fetch('/increment', { method: 'POST' });
  await Promise.race([allGot, late('the event did not reach every source')]);
  const states = sources.map((es) => es.readyState);
  sources.forEach((es) => es.close());
  return JSON.stringify({
    origin: location.origin,
    index: [index.status, indexBody],
    post: [post.status, post.headers.get('x-event-id')],
    open: states.filter((s) => s === 1).length,
    events: got,
  });
})()`;

let code = 0;
try {
  const endpoint = await new Promise((resolve, reject) => {
    let err = '';
    browser.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    browser.on('exit', (c) => reject(new Error(`chromium exited with ${c}: ${err}`)));
  });
  const port = new URL(endpoint).port;
  const target = await (await fetch(`http://127.0.0.1:${port}/json/new?about:blank`,
    { method: 'PUT' })).json();
  ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let loaded;
  const load = new Promise((resolve) => { loaded = resolve; });
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.id && waiting.has(m.id)) {
      waiting.get(m.id)(m);
      waiting.delete(m.id);
    } else if (m.method === 'Network.responseReceived') {
      const r = m.params.response;
      responses.push({ url: r.url, type: m.params.type, status: r.status, protocol: r.protocol,
        connectionId: r.connectionId });
    } else if (m.method === 'Page.loadEventFired') {
      loaded();
    }
  };
  await send('Network.enable');
  await send('Page.enable');
  const nav = await send('Page.navigate', { url });
  if (nav.errorText) throw new Error(`loading ${url}: ${nav.errorText}`);
  if (await Promise.race([load.then(() => 'loaded'), sleep(15000)]) !== 'loaded') {
    throw new Error(`${url} did not load within 15 s`);
  }
  const page = JSON.parse(await evaluate(PAGE));
  // the Network domain's last events may follow the page's answer by a turn of the loop
  await sleep(200);
  console.log(JSON.stringify({ page, responses }));
} catch (e) {
  console.log(`failed: ${e.message}`);
  code = 1;
} finally {
  if (ws) ws.close();
  browser.kill();
  await new Promise((resolve) => (browser.exitCode !== null ? resolve() : browser.on('exit', resolve)));
  // Chromium's helpers may still be writing their last files as the browser exits.
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  } catch (e) {
    console.error(`m0 test: ${profile} left behind: ${e.message}`);
  }
}
process.exit(code);
