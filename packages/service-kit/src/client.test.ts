import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { callJson, ServiceError } from "./client.ts";

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/ok") return send(200, { n: 1 });
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

  it("reports an unreachable service as retryable", async () => {
    const error = await callJson("http://127.0.0.1:1/x", { schema }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ code: "unreachable", retryable: true });
  });
});
