// SPDX-License-Identifier: MIT
// ws-node.js: the Node `ws` arm of bench M11 (SPEC WS7), answering what apps/bench_app answers:
//
//   node ws-node.js PORT
//   GET /echo                  a WebSocket that sends every message back as it came
//   GET /follow?channel=NAME   a WebSocket that gets every message published to the channel
//   POST /publish?channel=NAME&n=N   sends the body N times to the channel's followers, each
//                              message {"id","channel","event","data"} as m0 sends a channel's
//                              events to a WebSocket (WS2), built once and sent to each
//   GET /health                200
//
// `ws` is found where npm puts global packages (contrib/deps installs it there; bench.py sets
// NODE_PATH to `npm root -g`). No per-message deflate, as m0 has none.
'use strict';
const http = require('http');
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2]);
const followers = new Map(); // channel -> Set of sockets
let id = 0;

function publish(channel, data, n) {
  const set = followers.get(channel);
  for (let i = 0; i < n; i++) {
    id++;
    const msg = JSON.stringify({ id, channel, event: 'message', data });
    if (set) for (const ws of set) ws.send(msg);
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (req.method === 'GET' && url.pathname === '/health') {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end('ok\n');
    return;
  }
  if (req.method === 'POST' && url.pathname === '/publish') {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      publish(url.searchParams.get('channel') || 'bench', Buffer.concat(parts).toString(),
        Number(url.searchParams.get('n') || 1));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id }));
    });
    return;
  }
  res.writeHead(404);
  res.end();
});

const wss = new WebSocketServer({
  noServer: true, perMessageDeflate: false, clientTracking: false,
});

server.on('upgrade', (req, socket, head) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname !== '/echo' && url.pathname !== '/follow') {
    socket.destroy();
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    if (url.pathname === '/echo') {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      return;
    }
    const channel = url.searchParams.get('channel') || 'bench';
    if (!followers.has(channel)) followers.set(channel, new Set());
    followers.get(channel).add(ws);
    ws.on('close', () => followers.get(channel).delete(ws));
  });
});

server.listen(port, '127.0.0.1', 10000);
