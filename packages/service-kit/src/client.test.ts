import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { callJson } from "./client.ts";
import { ServiceError } from "./errors.ts";

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/ok") return send(200, { n: 1 });
    if (req.url === "/slow") return void setTimeout(() => send(200, { n: 2 }), 1_500);
    if (req.method === "POST" && req.url === "/echo") {
      const parts: Buffer[] = [];
      req.on("data", (c: Buffer) => parts.push(c));
      req.on("end", () =>
        send(200, { n: (JSON.parse(Buffer.concat(parts).toString()) as { n: number }).n + 1 }),
      );
      return;
    }
    if (req.url === "/wrong-shape") return send(200, { n: "one" });
    if (req.url === "/bad")
      return send(400, { error: { code: "invalid_request", message: "no", retryable: false } });
    return send(503, { error: { code: "model_server_unavailable", message: "later", retryable: true } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const schema = z.object({ n: z.number() });

describe("callJson", () => {
  it("returns the validated body", async () => {
    expect(await callJson(`${base}/ok`, { schema })).toEqual({ n: 1 });
  });

  it("rejects a body that breaks the contract, as non-retryable", async () => {
    await expect(callJson(`${base}/wrong-shape`, { schema })).rejects.toMatchObject({
      code: "contract_mismatch",
      retryable: false,
    });
  });

  it("carries the service's own error code for 4xx and 5xx", async () => {
    await expect(callJson(`${base}/bad`, { schema })).rejects.toMatchObject({
      status: 400,
      code: "invalid_request",
    });
    await expect(callJson(`${base}/down`, { schema })).rejects.toMatchObject({
      status: 503,
      retryable: true,
    });
  });

  it("sends a JSON body and reads the answer", async () => {
    expect(await callJson(`${base}/echo`, { schema, body: { n: 41 } })).toEqual({ n: 42 });
  });

  it("waits as long as its own timeout says, and names that timeout when it runs out", async () => {
    // Only the caller's timeout bounds a call (fetch's client would cut any answer after 300 s).
    expect(await callJson(`${base}/slow`, { schema, timeoutMs: 5_000 })).toEqual({ n: 2 });
    await expect(callJson(`${base}/slow`, { schema, timeoutMs: 300 })).rejects.toMatchObject({
      code: "unreachable",
      retryable: true,
      message: `cannot reach ${base}/slow: no answer within 300 ms`,
    });
  });

  it("stops when the caller's signal aborts", async () => {
    const error = await callJson(`${base}/slow`, { schema, signal: AbortSignal.timeout(100) }).catch(
      (err: unknown) => err,
    );
    expect(error).toMatchObject({ code: "unreachable", retryable: true });
  });

  it("reports an unreachable service as retryable", async () => {
    const error = await callJson("http://127.0.0.1:1/x", { schema }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ code: "unreachable", retryable: true });
  });
});
