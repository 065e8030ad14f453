'use strict';
// What the worker and the checkout (enqueue.js) share: the queue's name,
// the Redis connection, and the job id of a checkout.

const IORedis = require('ioredis');

const QUEUE = process.env.QUEUE || 'settle-charges';

// redisConnection connects to REDIS_URL (redis://host:port, the default
// redis://127.0.0.1:6379) or to the unix socket REDIS_SOCKET names.
// BullMQ's blocking commands need maxRetriesPerRequest: null.
function redisConnection() {
  const opts = { maxRetriesPerRequest: null };
  if (process.env.REDIS_SOCKET) {
    return new IORedis({ ...opts, path: process.env.REDIS_SOCKET });
  }
  return new IORedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', opts);
}

// jobId is the checkout's job id, and so Settle's request_id: made from the
// merchant's reference alone, it is the same however often the checkout
// enqueues the charge and however often BullMQ delivers it. Adding a job
// whose id exists is a no-op in BullMQ, and charging under a request_id
// already used replays that attempt in Settle. A customer's second click
// after a decline is a new attempt: give it a new id (attempt > 1).
function jobId(merchantReference, attempt = 1) {
  // BullMQ refuses ":" in a custom id (its own keys use it).
  if (merchantReference.includes(':')) {
    throw new Error(`merchant reference ${JSON.stringify(merchantReference)}: no ":" in a job id`);
  }
  return attempt > 1 ? `charge-${merchantReference}-${attempt}` : `charge-${merchantReference}`;
}

module.exports = { QUEUE, redisConnection, jobId };
