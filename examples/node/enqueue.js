'use strict';
// The checkout's side: put one charge on the queue.
//
//   node enqueue.js <merchant_reference> <amount_minor> <currency> <payment_method> [attempt]
//
// prints the job id. Running it twice for the same checkout adds nothing.

const { Queue } = require('bullmq');
const { QUEUE, redisConnection, jobId } = require('./queue');

async function main() {
  const [merchantReference, amountMinor, currency, paymentMethod, attempt = '1'] = process.argv.slice(2);
  if (!merchantReference || !amountMinor || !currency || !paymentMethod) {
    console.error('usage: node enqueue.js <merchant_reference> <amount_minor> <currency> <payment_method> [attempt]');
    process.exit(2);
  }
  const connection = redisConnection();
  const queue = new Queue(QUEUE, { connection });
  const id = jobId(merchantReference, Number(attempt));
  await queue.add(
    'charge',
    { merchantReference, amount: { currency, amountMinor: Number(amountMinor) }, paymentMethod },
    {
      jobId: id,
      // An unknown outcome (CHARGING) is retried until Settle's reconciler
      // has settled it; the backoff is the worker's (backoffStrategy).
      attempts: 25,
      backoff: { type: 'custom' },
      removeOnComplete: false,
      removeOnFail: false,
    },
  );
  console.log(id);
  await queue.close();
  connection.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
