// A Rhythm delivery webhook receiver on Node: verifies each request with the `standardwebhooks`
// library, processes each delivery once (deduplicated on `webhook-id`) and answers 2xx only once
// it is done.
//
// Environment: WEBHOOK_SECRET (the integration's `whsec_...` signing secret, required), PORT
// (default 8000; 0 picks a free one), HOST (default 127.0.0.1). Prints `listening on <url>` when
// ready. `GET /stats` answers what it accepted, refused and recognised as a repeat.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const MAX_BODY = 1 << 20; // far above any delivery

interface Change {
  type: string;
  change_id: string;
  record_type: string;
  record_id: string;
  occurred_at: string;
  warehouse: string | null;
  changed_fields: string[];
  data: Record<string, unknown>;
}

const secret = process.env.WEBHOOK_SECRET;
if (!secret) throw new Error("WEBHOOK_SECRET is required");
const webhook = new Webhook(secret);
// webhook-id -> the change it carried. A real receiver keeps this in its database, written in the
// same transaction as the effect of the change, and forgets ids after a few days.
const processed = new Map<string, string>();
const counts = { accepted: 0, duplicates: 0, refused: 0 };

function process_(change: Change): void {
  console.log(`${change.type} ${change.record_type}/${change.record_id} change ${change.change_id}`);
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

const server = createServer(async (req, res) => {
  if (req.method === "GET" && req.url === "/stats") {
    return answer(res, 200, { ...counts, accepted_ids: [...processed.keys()].sort() });
  }
  if (req.method !== "POST") return answer(res, 404, { error: "not found" });
  const body = await readBody(req);
  if (body === null) return answer(res, 413, { error: "too large" });
  let change: Change;
  try {
    // Verify the exact bytes received, before parsing anything.
    change = webhook.verify(body.toString("utf8"), req.headers as Record<string, string>) as Change;
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error;
    counts.refused += 1;
    return answer(res, 400, { error: error.message });
  }
  const deliveryId = req.headers["webhook-id"] as string;
  if (processed.has(deliveryId)) {
    // A repeat (our earlier answer was lost, or an operator resent it): acknowledge again
    // without doing the work twice.
    counts.duplicates += 1;
    return answer(res, 200, { duplicate: true });
  }
  process_(change);
  processed.set(deliveryId, change.change_id);
  counts.accepted += 1;
  answer(res, 200, { accepted: deliveryId });
});

const host = process.env.HOST ?? "127.0.0.1";
server.listen(Number(process.env.PORT ?? "8000"), host, () => {
  const { port } = server.address() as AddressInfo;
  console.log(`listening on http://${host}:${port}`);
});
