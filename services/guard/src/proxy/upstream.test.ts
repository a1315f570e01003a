import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSse, UpstreamClient } from "./upstream.ts";

/**
 * The guard's SSE reading over real HTTP: a local server writes event streams byte for byte as
 * servers other than vLLM may (CRLF line endings, data over several lines, comments, an endless
 * event), and the guard's upstream client reads them.
 */
let server: Server;
let client: UpstreamClient;
const bodies = new Map<string, string>();

beforeAll(async () => {
  server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(bodies.get(req.url ?? "") ?? "");
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  client = new UpstreamClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 5_000);
});
afterAll(() => {
  client.close();
  server.close();
});

const deadlines = { firstEventMs: 2_000, idleMs: 2_000 };

/** The payloads the guard reads from `body`, or the error that ended the reading. */
async function read(body: string, maxEventChars?: number): Promise<string[] | Error> {
  const path = `/s${bodies.size}`;
  bodies.set(path, body);
  const res = await client.post(path, {});
  const payloads: string[] = [];
  return readSse(res, deadlines, (data) => payloads.push(data), maxEventChars).then(
    () => payloads,
    (err: Error) => err,
  );
}

describe("reading the model server's event stream", () => {
  it("reads CRLF and CR line endings, joins data over several lines and skips comments", async () => {
    const body = [
      ": keep-alive\r\n\r\n",
      'data: {"a":1}\r\n\r\n',
      'event: message\rdata: {"b":\rdata: 2}\r\r',
      'data:{"c":3}\n\n',
      "data: [DONE]\r\n\r\n",
    ].join("");
    expect(await read(body)).toEqual(['{"a":1}', '{"b":\n2}', '{"c":3}']);
  });

  it("fails a stream that ends without [DONE], naming the cut", async () => {
    const result = await read('data: {"a":1}\n\n');
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toContain("before it was complete");
  });

  it("fails a stream whose event grows past the limit instead of buffering it", async () => {
    const result = await read(`data: ${"x".repeat(5_000)}`, 1_000);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toContain("more than 1000 characters");
  });
});
