// SPDX-License-Identifier: MIT
// todo_page.mjs CHROMIUM URL SHOT: loads todo's page at URL in headless Chromium and drives it
// through the DevTools protocol (run with node --experimental-websocket): the seeded list shown
// live, a todo added through the form, one marked done, one renamed, one deleted, and one that
// another client added arriving through /events. Writes a PNG screenshot of the end to SHOT and
// prints, as its last line, the JSON of what the page shows then; exits 1 with the step that
// failed.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [chromium, url, shot] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), 'm0-chromium-'));
const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--disable-dev-shm-usage', '--remote-debugging-port=0',
  `--user-data-dir=${profile}`, '--window-size=800,600', 'about:blank'],
{ stdio: ['ignore', 'ignore', 'pipe'] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
// What the page shows: each item's title and whether it is done, the count and the stream
// (empty while the page is still loading).
const SHOWN = `JSON.stringify({
  items: [...document.querySelectorAll('#list li')].map(
    (li) => [li.querySelector('.title').textContent, li.querySelector('.done').checked]),
  count: document.getElementById('count')?.textContent ?? '',
  live: document.getElementById('live')?.textContent ?? ''})`;
const until = async (what, cond) => {
  const t0 = Date.now();
  for (;;) {
    const s = JSON.parse(await evaluate(SHOWN));
    if (cond(s)) return s;
    if (Date.now() - t0 > 10000) throw new Error(`${what}: the page shows ${JSON.stringify(s)}`);
    await sleep(50);
  }
};
// An expression run on the item whose title is `title`.
const onItem = (title, expr) => evaluate(`(() => {
  const li = [...document.querySelectorAll('#list li')].find(
    (l) => l.querySelector('.title').textContent === ${JSON.stringify(title)});
  ${expr}
})()`);
const titles = (s) => s.items.map(([t]) => t);

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
  const target = await (await fetch(`http://127.0.0.1:${port}/json/new?${url}`,
    { method: 'PUT' })).json();
  ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.id && waiting.has(m.id)) {
      waiting.get(m.id)(m);
      waiting.delete(m.id);
    }
  };
  await until('the seeded list, following the stream',
    (s) => s.items.length === 2 && s.live === 'live');
  await evaluate(`document.getElementById('new-title').value = 'from chromium';
    document.getElementById('add').requestSubmit()`);
  await until('the todo added through the form', (s) => titles(s).includes('from chromium'));
  await onItem('buy milk', "li.querySelector('.done').click()");
  await until('buy milk marked done',
    (s) => s.items.some(([t, done]) => t === 'buy milk' && done));
  await onItem('from chromium', `li.querySelector('.title').dispatchEvent(new MouseEvent('dblclick'));
    const edit = li.querySelector('.edit');
    edit.value = 'renamed in chromium';
    edit.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))`);
  await until('the todo renamed', (s) => titles(s).includes('renamed in chromium'));
  await onItem('<b>not bold</b>', "li.querySelector('.delete').click()");
  await until('the todo deleted', (s) => !titles(s).includes('<b>not bold</b>'));
  const r = await fetch(new URL('/todos', url), {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ title: 'from another client' }),
  });
  if (r.status !== 201) throw new Error(`POST /todos from another client: ${r.status}`);
  const end = await until('the other client\'s todo, through /events',
    (s) => titles(s).includes('from another client'));
  const png = await send('Page.captureScreenshot', { format: 'png' });
  writeFileSync(shot, Buffer.from(png.data, 'base64'));
  console.log(JSON.stringify(end));
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
