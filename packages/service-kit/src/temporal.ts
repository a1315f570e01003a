import { readFileSync } from "node:fs";
import { TemporalNamespace } from "@bridle/contracts";
import { z } from "zod";
import { EnvError } from "./env.ts";

/** A PEM file named by a setting, read when the settings are loaded (a missing file names it). */
const pemFile = z
  .string()
  .min(1)
  .transform((path, ctx) => {
    try {
      return readFileSync(path);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: `cannot read ${path}: ${(err as Error).message}` });
      return z.NEVER;
    }
  });

/**
 * How a component reaches Temporal: the stack's own dev server in plain text, or a cluster or
 * Temporal Cloud over TLS, with a client certificate (mutual TLS) or an API key. Shared by the
 * gateway and the worker, the two components that talk to Temporal.
 */
export const TemporalEnv = z.object({
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233").describe("host:port of Temporal's frontend"),
  TEMPORAL_NAMESPACE: z.string().default(TemporalNamespace),
  TEMPORAL_TLS: z
    .enum(["auto", "on", "off"])
    .default("auto")
    .describe("TLS to the frontend; auto: on when any other TEMPORAL_TLS_* or TEMPORAL_API_KEY is set"),
  TEMPORAL_TLS_CERT: pemFile
    .optional()
    .describe("Client certificate (PEM file) for mutual TLS, with TEMPORAL_TLS_KEY"),
  TEMPORAL_TLS_KEY: pemFile.optional().describe("The client certificate's private key (PEM file)"),
  TEMPORAL_TLS_CA: pemFile
    .optional()
    .describe("The authority that signed the frontend's certificate (PEM file); unset: the system's"),
  TEMPORAL_TLS_SERVER_NAME: z
    .string()
    .min(1)
    .optional()
    .describe("The name the frontend's certificate is checked against; unset: the address's host"),
  TEMPORAL_API_KEY: z.string().min(1).optional().describe("An API key (Temporal Cloud); implies TLS"),
});
export type TemporalEnv = z.infer<typeof TemporalEnv>;

/** What both Temporal SDK connections (the client's and the worker's) take. */
export interface TemporalConnectionOptions {
  address: string;
  tls?: {
    serverNameOverride?: string;
    serverRootCACertificate?: Buffer;
    clientCertPair?: { crt: Buffer; key: Buffer };
  };
  apiKey?: string;
  metadata?: Record<string, string>;
}

/**
 * The connection options of these settings, or the problem with them: a certificate needs its key
 * (and the other way round), and TLS settings with TEMPORAL_TLS=off contradict each other.
 */
export function temporalConnection(env: TemporalEnv): TemporalConnectionOptions {
  const {
    TEMPORAL_TLS_CERT: crt,
    TEMPORAL_TLS_KEY: key,
    TEMPORAL_TLS_CA: ca,
    TEMPORAL_API_KEY: apiKey,
  } = env;
  if ((crt === undefined) !== (key === undefined))
    throw new EnvError("temporal", [
      "TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: set both for mutual TLS, or neither",
    ]);
  const anyTls =
    crt !== undefined || ca !== undefined || apiKey !== undefined || !!env.TEMPORAL_TLS_SERVER_NAME;
  if (env.TEMPORAL_TLS === "off" && anyTls)
    throw new EnvError("temporal", [
      "TEMPORAL_TLS=off, yet TLS settings or an API key are set: unset them, or TEMPORAL_TLS",
    ]);
  const options: TemporalConnectionOptions = { address: env.TEMPORAL_ADDRESS };
  if (env.TEMPORAL_TLS === "on" || anyTls) {
    options.tls = {
      ...(env.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: env.TEMPORAL_TLS_SERVER_NAME } : {}),
      ...(ca ? { serverRootCACertificate: ca } : {}),
      ...(crt && key ? { clientCertPair: { crt, key } } : {}),
    };
  }
  if (apiKey) {
    options.apiKey = apiKey;
    // Temporal Cloud routes an API key's calls by the namespace named in this header.
    options.metadata = { "temporal-namespace": env.TEMPORAL_NAMESPACE };
  }
  return options;
}
