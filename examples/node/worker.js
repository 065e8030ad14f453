'use strict';
// A BullMQ worker that charges checkouts through Settle.
//
// BullMQ delivers a job at least once: a worker that dies mid-job (a deploy,
// an OOM kill) leaves the job's lock to expire, and the next worker takes
// the job again. The job's id is the checkout's (queue.js), and it is sent
// as Settle's request_id, so a second delivery replays the first one's
// attempt instead of charging again. Settle finishes a charge whose caller
// went away, and its reconciler settles an unknown outcome; the worker only
// has to ask again until the order is settled.
//
// Environment: SETTLE_ADDR (host:port of Settle's gRPC, default settle
// dev's 127.0.0.1:50051), SETTLE_KEY (a checkout key), REDIS_URL or
// REDIS_SOCKET, QUEUE; LOCK_MS and STALLED_MS tune how soon a dead
// worker's job is taken again (BullMQ's lockDuration and stalledInterval).
// Each step prints one JSON line.

const { Worker, UnrecoverableError } = require('bullmq');
const { Settle, PAID_STATES, grpc } = require('./settle');
const { QUEUE, redisConnection } = require('./queue');

const log = (msg, fields = {}) => console.log(JSON.stringify({ msg, ...fields }));

// Codes worth a retry under the same request_id; any other error is the
// request's fault and retrying cannot mend it.
const RETRYABLE = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED, grpc.status.ABORTED]);

// chargeCheckout is the job: charge the checkout once, whatever happened
// to the deliveries before this one.
async function chargeCheckout(settle, job) {
  const { merchantReference, amount, paymentMethod } = job.data;
  const requestId = job.id;
  const fields = { job: job.id, merchant_reference: merchantReference, delivery: job.attemptsMade + 1 };

  // The early return: an earlier delivery (or another worker) charged it.
  const existing = await settle.getOrderByReference(merchantReference);
  if (existing && PAID_STATES.has(existing.state)) {
    log('already paid', { ...fields, order_id: existing.id, state: existing.state });
    return { orderId: existing.id, state: existing.state, early: true };
  }

  log('charging', { ...fields, request_id: requestId, state: existing ? existing.state : 'NEW' });
  let res;
  try {
    res = await settle.createAndCharge({ merchantReference, amount, paymentMethod, requestId });
  } catch (err) {
    if (RETRYABLE.has(err.code)) throw err;
    throw new UnrecoverableError(`Settle refused the charge: ${grpc.status[err.code]}: ${err.details}`);
  }
  const { order } = res;
  const result = { orderId: order.id, state: order.state, early: false };
  switch (order.state) {
    case 'ORDER_STATE_PAID':
      log('paid', { ...fields, order_id: order.id });
      return result;
    case 'ORDER_STATE_CHARGING':
      // The gateway has not said yet (or another delivery's call is in
      // flight): not a failure. Ask again later, under the same request_id.
      log('charging in flight', { ...fields, order_id: order.id, no_attempt_reason: res.no_attempt_reason });
      throw new Error(`order ${order.id} is CHARGING; retrying until Settle settles it`);
    case 'ORDER_STATE_REQUIRES_ACTION':
      // The customer must authenticate: the checkout shows the page.
      log('requires action', { ...fields, order_id: order.id });
      return { ...result, redirectUrl: res.next_action && res.next_action.redirect_url };
    case 'ORDER_STATE_PENDING': {
      // Declined, or provably not sent: retrying this request_id replays
      // that answer. A new attempt is the customer's, as a new job.
      const code = res.attempt ? res.attempt.decline_code : '';
      log('declined', { ...fields, order_id: order.id, decline_code: code });
      throw new UnrecoverableError(`order ${order.id} declined ${code}`);
    }
    default:
      // NEEDS_REVIEW, CANCELED, AUTHORIZED, ...: a person or another flow
      // decides; this job is over.
      log('not charged here', { ...fields, order_id: order.id, state: order.state });
      return result;
  }
}

function main() {
  const settle = new Settle({ addr: process.env.SETTLE_ADDR || '127.0.0.1:50051', key: process.env.SETTLE_KEY });
  const connection = redisConnection();
  const worker = new Worker(QUEUE, (job) => chargeCheckout(settle, job), {
    connection,
    concurrency: 4,
    lockDuration: Number(process.env.LOCK_MS || 30_000),
    stalledInterval: Number(process.env.STALLED_MS || 30_000),
    settings: {
      // backoff: { type: 'custom' } on the job: 0.5 s, 1 s, 2 s, ... at
      // most 30 s between deliveries while an outcome is unknown.
      backoffStrategy: (attemptsMade) => Math.min(500 * 2 ** (attemptsMade - 1), 30_000),
    },
  });
  worker.on('ready', () => log('ready', { queue: QUEUE }));
  worker.on('completed', (job, result) => log('completed', { job: job.id, ...result }));
  worker.on('failed', (job, err) => log('failed', { job: job && job.id, error: err.message }));
  worker.on('error', (err) => log('error', { error: err.message }));

  const stop = async () => {
    await worker.close();
    settle.close();
    connection.disconnect();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
