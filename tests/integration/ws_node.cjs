// SPDX-License-Identifier: MIT
// ws_node.cjs URL: Node's `ws` (npm, installed globally by contrib/deps) against ws_check's
// /echo (SPEC WS5): a text and a binary message back as sent, then the app's close 4001; each
// step one line on stdout, the last "close 4001 bye now".
const WebSocket = require("ws");
const ws = new WebSocket(process.argv[2]);
ws.on("open", () => ws.send("héllo"));
ws.on("message", (data, isBinary) => {
        if (!isBinary) {
                console.log(`text ${data.toString()}`);
                ws.send(Buffer.from([0, 255, 1]));
        } else {
                console.log(`binary ${Buffer.from(data).toString("hex")}`);
                ws.send("close 4001 bye now");
        }
});
ws.on("close", (code, reason) => {
        console.log(`close ${code} ${reason.toString()}`);
        process.exit(0);
});
ws.on("error", (e) => {
        console.log(`error ${e.message}`);
        process.exit(1);
});
setTimeout(() => {
        console.log("timeout");
        process.exit(1);
}, 10000);
