// SPDX-License-Identifier: MIT
// idle_fetch.mjs URL TRIES IDLE_MS: Node's fetch (undici) asks URL, then asks it again on the
// same pool from 3 ms before to 3 ms after IDLE_MS past the first answer, TRIES times: the
// window in which a client that reuses an idle connection meets the server's close (D111).
// Prints "failed N of TRIES" last; exits 1 when any try failed.
const [url, tries = '30', idle = '500'] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let failed = 0;
for (let i = 0; i < Number(tries); i++) {
  try {
    await (await fetch(url)).text();
    await sleep(Number(idle) - 3 + (i % 7));
    await (await fetch(url)).text();
  } catch (e) {
    failed++;
    console.log(`try ${i}: ${e.cause ? e.cause.message : e.message}`);
  }
}
console.log(`failed ${failed} of ${tries}`);
process.exit(failed ? 1 : 0);
