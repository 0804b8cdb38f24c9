// SPDX-License-Identifier: MIT
// todo_page.mjs CHROMIUM URL SHOT: loads todo's page at URL in headless Chromium and drives it
// through the DevTools protocol (run with node --experimental-websocket): the seeded list shown
// live, a todo added through the form, one marked done, one renamed, one deleted, and one that
// another client added arriving through /events. Writes a PNG screenshot of the end to SHOT and
// prints, as its last line, the JSON of what the page shows then; exits 1 with the step that
// failed.
import { writeFileSync } from 'node:fs';
import { drive, sleep } from './chromium.mjs';

const [chromium, url, shot] = process.argv.slice(2);

// What the page shows: each item's title and whether it is done, the count and the stream
// (empty while the page is still loading).
const SHOWN = `JSON.stringify({
  items: [...document.querySelectorAll('#list li')].map(
    (li) => [li.querySelector('.title').textContent, li.querySelector('.done').checked]),
  count: document.getElementById('count')?.textContent ?? '',
  live: document.getElementById('live')?.textContent ?? ''})`;
const titles = (s) => s.items.map(([t]) => t);

await drive(chromium, ['--window-size=800,600'], async (page) => {
  const { send, evaluate } = page;
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
}, url);
