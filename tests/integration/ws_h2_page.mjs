// SPDX-License-Identifier: MIT
// ws_h2_page.mjs CHROMIUM PAGE_URL WS_URL: headless Chromium loads PAGE_URL (over TLS, which
// opens its HTTP/2 connection), then opens a WebSocket to WS_URL from that page, sends two
// messages and prints, as its last line, the JSON of what came back; exits 1 with the step that
// failed. Driven through the DevTools protocol (run with node --experimental-websocket).
import { drive } from './chromium.mjs';

const [chromium, pageUrl, wsUrl] = process.argv.slice(2);
await drive(chromium, ['--ignore-certificate-errors'], async ({ send, evaluate }) => {
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
});
