'use strict';
// A small client of Settle's OrderService over gRPC, loading the API
// contract from the repository's proto/ at run time (no generated code):
// @grpc/grpc-js for the transport, @grpc/proto-loader for the types.

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// PROTO_DIR is the root of the .proto files (the repository's proto/);
// SETTLE_PROTO_DIR overrides it for a copy of the contract elsewhere.
const PROTO_DIR = process.env.SETTLE_PROTO_DIR || path.join(__dirname, '..', '..', 'proto');

// States in which the order's money has moved: a job that finds its order
// in one of them has nothing left to do.
const PAID_STATES = new Set(['ORDER_STATE_PAID', 'ORDER_STATE_PARTIALLY_REFUNDED', 'ORDER_STATE_REFUNDED']);

// The deadline of one call. Settle answers a charge within its gateway
// timeout (10s by default); an unknown outcome is an answer (CHARGING),
// not an error.
const CALL_TIMEOUT_MS = 30_000;

function loadOrderService() {
  const def = protoLoader.loadSync(path.join('settle', 'v1', 'order.proto'), {
    includeDirs: [PROTO_DIR],
    keepCase: true, // field names as in the .proto: merchant_reference
    longs: Number, // amounts in minor units fit a double
    enums: String, // ORDER_STATE_PAID, not 3
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(def).settle.v1.OrderService;
}

class Settle {
  // addr is host:port of Settle's gRPC listener; key the checkout API key.
  // Plaintext suits settle dev on loopback; pass grpc.credentials.createSsl()
  // for a server behind TLS.
  constructor({ addr, key, credentials = grpc.credentials.createInsecure() }) {
    if (!addr || !key) {
      throw new Error('Settle needs an address (SETTLE_ADDR) and a checkout key (SETTLE_KEY)');
    }
    const OrderService = loadOrderService();
    this.client = new OrderService(addr, credentials);
    this.key = key;
  }

  call(method, request) {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.key}`);
    const deadline = new Date(Date.now() + CALL_TIMEOUT_MS);
    return new Promise((resolve, reject) => {
      this.client[method](request, md, { deadline }, (err, res) => (err ? reject(err) : resolve(res)));
    });
  }

  // getOrderByReference returns the order, or null when there is none.
  async getOrderByReference(merchantReference) {
    try {
      const res = await this.call('GetOrder', { merchant_reference: merchantReference });
      return res.order;
    } catch (err) {
      if (err.code === grpc.status.NOT_FOUND) return null;
      throw err;
    }
  }

  // createAndCharge creates the order (idempotent on merchant_reference)
  // and charges it under requestId: the same requestId again is the same
  // attempt, never a second charge.
  createAndCharge({ merchantReference, amount, paymentMethod, requestId }) {
    return this.call('CreateAndChargeOrder', {
      merchant_reference: merchantReference,
      amount: { currency: amount.currency, amount_minor: amount.amountMinor },
      payment_method: paymentMethod,
      request_id: requestId,
    });
  }

  close() {
    this.client.close();
  }
}

module.exports = { Settle, PAID_STATES, grpc };
