// Drives delayer's QStash API with QStash's own TypeScript SDK (npm `@upstash/qstash`), as an
// application does.
//
// Usage: node qstash_client.cjs BASE_URL TOKEN CALL < JSON_ARGUMENTS
// CALL names the SDK's method from the client: `publishJSON`, `messages.cancel`,
// `schedules.create`, `queue(NAME).enqueueJSON` (`queue()` for none); JSON_ARGUMENTS is the
// array of its arguments. `verify` checks a signature with the SDK's Receiver instead:
// [{currentSigningKey, nextSigningKey}, {signature, body, url}].
// Prints what the SDK returned, as JSON; an SDK error prints {"error": "..."}.

const fs = require("fs");
const { Client, Receiver } = require("@upstash/qstash");

async function call(baseUrl, token, name, args) {
  if (name === "verify") {
    const [keys, request] = args;
    return await new Receiver(keys).verify(request);
  }
  // No retries: a refusal must show as it is, at once.
  const client = new Client({ baseUrl, token, retry: false });
  const parts = name.split(".");
  const method = parts.pop();
  let target = client;
  for (const part of parts) {
    const queue = part.match(/^queue\((.*)\)$/);
    target = queue ? target.queue({ queueName: queue[1] || undefined }) : target[part];
  }
  return await target[method](...args);
}

async function main() {
  const [baseUrl, token, name] = process.argv.slice(2);
  const args = JSON.parse(fs.readFileSync(0, "utf8"));
  let result;
  try {
    result = await call(baseUrl, token, name, args);
  } catch (error) {
    result = { error: String(error && error.message ? error.message : error) };
  }
  process.stdout.write(JSON.stringify(result === undefined ? null : result));
}

main();
