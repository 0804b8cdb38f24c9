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
import { drive, sleep } from './chromium.mjs';

const [chromium, url, spki, n, ...flags] = process.argv.slice(2);

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

await drive(chromium, [`--ignore-certificate-errors-spki-list=${spki}`,
  '--host-resolver-rules=MAP a.test 127.0.0.1', ...flags], async ({ send, evaluate, on }) => {
  const responses = [];
  let loaded;
  const load = new Promise((resolve) => { loaded = resolve; });
  on('Network.responseReceived', (p) => {
    const r = p.response;
    responses.push({ url: r.url, type: p.type, status: r.status, protocol: r.protocol,
      connectionId: r.connectionId });
  });
  on('Page.loadEventFired', () => loaded());
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
});
