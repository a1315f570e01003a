import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type Server } from "node:tls";
import { fileURLToPath } from "node:url";
import type { BaseModelInfo, CompletionResult, ProbeResult } from "@bridle/contracts";
import { TaskQueues } from "@bridle/contracts";
import { EnvError, loadEnv, repoRoot, TemporalEnv, temporalConnection } from "@bridle/service-kit";
import { Client, Connection } from "@temporalio/client";
import { NativeConnection, Worker } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevTemporal, startDevTemporal } from "./stand-ins.ts";

/**
 * The worker's and the gateway's connection to a Temporal cluster over mutual TLS, as a cluster or
 * Temporal Cloud asks: a real Temporal dev server behind a real TLS endpoint that demands a client
 * certificate signed by the test's own authority (certificates made with openssl here). The probe
 * workflow's activities are stand-ins (no serving behind them).
 */
const home = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");
const temporalBin = join(home, "venv", "bin", "temporal");
const dir = mkdtempSync(join(tmpdir(), "bridle-tls-"));
const file = (name: string) => join(dir, name);
let temporal: DevTemporal;
let endpoint: Server;
let address: string;

function makeCertificates() {
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  ssl(
    "req",
    "-x509",
    ...key,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=bridle test authority",
  );
  for (const [name, usage] of [
    ["server", "serverAuth"],
    ["client", "clientAuth"],
  ] as const) {
    writeFileSync(file(`${name}.ext`), `subjectAltName=DNS:localhost\nextendedKeyUsage=${usage}\n`);
    ssl("req", ...key, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=bridle ${name}`);
    ssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    );
  }
}

/** The settings a worker or gateway would be given, read as they read them. */
const settings = (extra: Record<string, string> = {}) =>
  temporalConnection(
    loadEnv("worker", TemporalEnv, {
      TEMPORAL_ADDRESS: address,
      TEMPORAL_TLS_CA: file("ca.pem"),
      TEMPORAL_TLS_SERVER_NAME: "localhost",
      ...extra,
    }),
  );
const mutual = () =>
  settings({ TEMPORAL_TLS_CERT: file("client.pem"), TEMPORAL_TLS_KEY: file("client.key") });

beforeAll(async () => {
  if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
  makeCertificates();
  temporal = await startDevTemporal(temporalBin);
  const [host, port] = temporal.address.split(":") as [string, string];
  // TLS ends here; the frontend behind it speaks plain HTTP/2, as a cluster's would behind its proxy.
  endpoint = createServer(
    {
      key: readFileSync(file("server.key")),
      cert: readFileSync(file("server.pem")),
      ca: readFileSync(file("ca.pem")),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ["h2"],
    },
    (client) => {
      const upstream: Socket = connect(Number(port), host);
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    },
  );
  endpoint.on("tlsClientError", () => undefined); // refused handshakes are what one test expects
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  address = `127.0.0.1:${(endpoint.address() as { port: number }).port}`;
}, 120_000);

afterAll(async () => {
  endpoint?.close();
  await temporal?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("Temporal over mutual TLS", () => {
  it("runs a workflow whose worker and client both connect with a client certificate", async () => {
    const model: BaseModelInfo = { id: "stand-in", root: "stand-in", maxModelLen: null, adapters: [] };
    const completion: CompletionResult = {
      model: "stand-in",
      adapter: null,
      text: "ready",
      finishReason: "stop",
      promptTokenIds: [1],
      completionTokenIds: [2],
      logprobs: [-0.1],
    };
    const native = await NativeConnection.connect(mutual());
    const worker = await Worker.create({
      connection: native,
      namespace: "bridle",
      taskQueue: TaskQueues.control,
      workflowsPath: fileURLToPath(new URL("./workflows/index.ts", import.meta.url)),
      activities: { describeModel: async () => model, sampleCompletion: async () => completion },
    });
    const connection = await Connection.connect(mutual());
    try {
      const result = await worker.runUntil(
        new Client({ connection, namespace: "bridle" }).workflow.execute("probeStack", {
          taskQueue: TaskQueues.control,
          workflowId: `tls-probe-${Date.now()}`,
          args: [{ prompt: "ready?", maxTokens: 1 }],
        }),
      );
      expect((result as ProbeResult).completion.text).toBe("ready");
    } finally {
      await connection.close();
      await native.close();
    }
  }, 120_000);

  it("is refused without a client certificate, and the settings name what is wrong", async () => {
    await expect(
      Connection.connect({ ...settings(), connectTimeout: 5_000 }).then((c) =>
        c.workflowService.getSystemInfo({}),
      ),
    ).rejects.toThrow();
    expect(() => settings({ TEMPORAL_TLS_CERT: file("client.pem") })).toThrow(EnvError);
    expect(() => settings({ TEMPORAL_TLS_CERT: file("client.pem") })).toThrow(
      /TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together/,
    );
    expect(() => settings({ TEMPORAL_TLS_CA: file("missing.pem") })).toThrow(
      /TEMPORAL_TLS_CA: cannot read .*missing\.pem/,
    );
    expect(() => settings({ TEMPORAL_TLS: "off" })).toThrow(/TEMPORAL_TLS=off, yet TLS settings/);
    // The stack's own dev server: plain text, nothing to set.
    expect(temporalConnection(loadEnv("worker", TemporalEnv, {}))).toEqual({ address: "127.0.0.1:7233" });
    const cloud = temporalConnection(
      loadEnv("worker", TemporalEnv, {
        TEMPORAL_ADDRESS: "ns.acct.tmprl.cloud:7233",
        TEMPORAL_NAMESPACE: "ns.acct",
        TEMPORAL_API_KEY: "key-123",
      }),
    );
    expect(cloud).toEqual({
      address: "ns.acct.tmprl.cloud:7233",
      tls: {},
      apiKey: "key-123",
      metadata: { "temporal-namespace": "ns.acct" },
    });
  }, 60_000);
});
