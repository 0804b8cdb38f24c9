// SPDX-License-Identifier: MIT
// chromium.mjs: headless Chromium through the DevTools protocol, for the tests' page drivers
// (todo_page.mjs, sse_page.mjs, ws_h2_page.mjs; node --experimental-websocket). One browser,
// a profile of its own in a temporary directory, one page on about:blank.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts CHROMIUM with FLAGS beside the common ones and connects to a new page, opened on URL
// (about:blank unless given: a page opened on its address is never evaluated mid-navigation). Resolves to
// { send(method, params), evaluate(expression), on(method, fn), close() }; close() is always
// owed, and leaves neither the browser nor its profile behind. Rejects (having closed) when the
// browser does not come up.
export async function open(chromium, flags = [], url = 'about:blank') {
  const profile = mkdtempSync(join(tmpdir(), 'm0-chromium-'));
  const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu',
    '--no-first-run', '--disable-dev-shm-usage', '--remote-debugging-port=0',
    `--user-data-dir=${profile}`, ...flags, 'about:blank'],
  { stdio: ['ignore', 'ignore', 'pipe'] });
  let ws;
  let next = 0;
  const waiting = new Map();
  const handlers = new Map();
  const close = async () => {
    if (ws) ws.close();
    if (browser.exitCode === null && browser.signalCode === null) {
      const gone = new Promise((resolve) => browser.on('exit', resolve));
      browser.kill();
      await gone;
    }
    // Chromium's helpers may still be writing their last files as the browser exits.
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } catch (e) {
      console.error(`m0 test: ${profile} left behind: ${e.message}`);
    }
  };
  const send = (method, params = {}) => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`))
      : resolve(m.result)));
    ws.send(JSON.stringify({ id, method, params }));
  });
  const evaluate = async (expression) => {
    const r = await send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    const x = r.exceptionDetails;
    if (x) {
      throw new Error(`${expression.slice(0, 80)}: ${x.exception ? x.exception.description : x.text}`);
    }
    return r.result.value;
  };
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
      } else if (m.method && handlers.has(m.method)) {
        handlers.get(m.method)(m.params);
      }
    };
  } catch (e) {
    await close();
    throw e;
  }
  return { send, evaluate, on: (method, fn) => handlers.set(method, fn), close };
}

// Runs MAIN(page) on a browser opened as open() does, prints "failed: why" for what it throws,
// closes the browser and exits 0, or 1 when something failed.
export async function drive(chromium, flags, main, url = 'about:blank') {
  let page;
  let code = 0;
  try {
    page = await open(chromium, flags, url);
    await main(page);
  } catch (e) {
    console.log(`failed: ${e.message}`);
    code = 1;
  } finally {
    if (page) await page.close();
  }
  process.exit(code);
}
