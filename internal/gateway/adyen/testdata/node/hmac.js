// Reads {"key": "<hex HMAC key>", "items": [<NotificationRequestItem>, ...]}
// from standard input, and writes, for each item, the signature Adyen's own
// HmacValidator computes for it with the key, and whether the validator
// accepts the item's additionalData.hmacSignature:
// [{"signature": "<base64>", "valid": true|false}, ...].
"use strict";

const { hmacValidator: HmacValidator } = require("@adyen/api-library");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const { key, items } = JSON.parse(input);
  const validator = new HmacValidator();
  const out = items.map((item) => {
    let valid;
    try {
      valid = validator.validateHMAC(item, key);
    } catch (e) {
      // No hmacSignature at all.
      valid = false;
    }
    return { signature: validator.calculateHmac(item, key), valid };
  });
  process.stdout.write(JSON.stringify(out));
});
