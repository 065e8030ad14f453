'use strict';
// A receiver of Settle's events (order.paid, refund.succeeded, ...), which
// Settle signs as the Standard Webhooks spec says; the spec's own library
// verifies them. A bad signature, or a timestamp more than five minutes
// off, is refused with 400 and the event is not processed; Settle retries
// what was not answered 2xx.
//
// Environment: WEBHOOK_SECRET (the endpoint's secret as configured in
// Settle: whsec_<base64> or any other string, taken as raw bytes), HOST
// (default 127.0.0.1) and PORT (default 0: a free port). It prints
// {"msg":"listening","addr":...} once it serves, then one JSON line per
// delivery; GET /events lists the events it accepted.

const http = require('node:http');
const { Webhook } = require('standardwebhooks');

const MAX_BODY = 1 << 20;

const log = (msg, fields = {}) => console.log(JSON.stringify({ msg, ...fields }));

// verifier builds the library's verifier for a secret as Settle takes it:
// a whsec_ secret is the base64 of the key, any other is the key's bytes.
function verifier(secret) {
  if (!secret) throw new Error('WEBHOOK_SECRET is not set');
  return secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function main() {
  const wh = verifier(process.env.WEBHOOK_SECRET);
  // Deliveries are at least once: webhook-id is the event's id, the same
  // on every retry, so a repeat is answered 200 and not processed again.
  // (A real receiver keeps these in its database, with what it did.)
  const accepted = new Map();

  const server = http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/events') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify([...accepted.values()]));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/events') {
      res.writeHead(404).end();
      return;
    }
    let body;
    try {
      body = await readBody(req);
    } catch {
      res.writeHead(413).end();
      return;
    }
    let event;
    try {
      // The raw body, as received: re-serialized JSON would not verify.
      event = wh.verify(body, req.headers);
    } catch (err) {
      log('rejected', { webhook_id: req.headers['webhook-id'], error: err.message });
      res.writeHead(400, { 'content-type': 'text/plain' }).end('bad signature\n');
      return;
    }
    const id = req.headers['webhook-id'];
    if (accepted.has(id)) {
      log('duplicate', { webhook_id: id });
      res.writeHead(200).end();
      return;
    }
    const order = event.order || {};
    const entry = { webhook_id: id, type: event.type, order_id: order.id || (event.refund && event.refund.order_id), state: order.state };
    accepted.set(id, entry);
    log('event', entry);
    res.writeHead(200).end();
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  server.listen(Number(process.env.PORT || 0), process.env.HOST || '127.0.0.1', () => {
    const a = server.address();
    log('listening', { addr: `${a.address}:${a.port}` });
  });
  const stop = () => server.close();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
