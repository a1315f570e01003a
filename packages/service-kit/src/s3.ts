import { createHash, createHmac } from "node:crypto";
import { z } from "zod";
import { EnvError } from "./env.ts";

/** An S3-compatible bucket and the credentials to write to it. */
export interface S3Bucket {
  /** The endpoint and bucket, path style: `https://s3.example.com/my-bucket`. */
  url: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();
/** RFC 3986 encoding, as SigV4 wants it (each path segment; `/` kept between them). */
const encode = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function stamp(now: Date) {
  const iso = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  return { amzDate: iso, day: iso.slice(0, 8) };
}

function signingKey(bucket: S3Bucket, day: string): Buffer {
  const date = hmac(`AWS4${bucket.secretAccessKey}`, day);
  return hmac(hmac(hmac(date, bucket.region), "s3"), "aws4_request");
}

/** The object's URL and the parts of it a signature covers. */
function target(bucket: S3Bucket, key: string) {
  const url = new URL(`${bucket.url.replace(/\/+$/, "")}/${key.split("/").map(encode).join("/")}`);
  return { url, path: url.pathname };
}

/**
 * A request to the object `key`, signed with AWS Signature Version 4 in its headers (and any extra
 * `headers`, signed too). `payloadSha256` is the body's sha256 (hex), which S3 checks against what
 * arrives; an empty body's by default.
 */
export function signedRequest(
  bucket: S3Bucket,
  method: "PUT" | "GET" | "DELETE" | "HEAD",
  key: string,
  options: { payloadSha256?: string; headers?: Record<string, string>; now?: Date } = {},
): { url: string; headers: Record<string, string> } {
  const { url, path } = target(bucket, key);
  const { amzDate, day } = stamp(options.now ?? new Date());
  const payloadSha256 = options.payloadSha256 ?? sha256("");
  const headers: Record<string, string> = {
    ...Object.fromEntries(Object.entries(options.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v.trim()])),
    host: url.host,
    "x-amz-content-sha256": payloadSha256,
    "x-amz-date": amzDate,
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    method,
    path,
    "",
    ...names.map((n) => `${n}:${headers[n]}`),
    "",
    names.join(";"),
    payloadSha256,
  ].join("\n");
  const scope = `${day}/${bucket.region}/s3/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  const signature = createHmac("sha256", signingKey(bucket, day)).update(toSign).digest("hex");
  const { host: _, ...sent } = headers;
  return {
    url: url.toString(),
    headers: {
      ...sent,
      authorization: `AWS4-HMAC-SHA256 Credential=${bucket.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`,
    },
  };
}

/**
 * A URL that reads the object `key` for `expiresSec` without credentials (a presigned GET): what an
 * artifact reference hands to a reader on another host.
 */
export function presignedGet(bucket: S3Bucket, key: string, expiresSec: number, now = new Date()): string {
  const { url, path } = target(bucket, key);
  const { amzDate, day } = stamp(now);
  const scope = `${day}/${bucket.region}/s3/aws4_request`;
  const query: Record<string, string> = {
    "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
    "X-Amz-Credential": `${bucket.accessKeyId}/${scope}`,
    "X-Amz-Date": amzDate,
    "X-Amz-Expires": String(expiresSec),
    "X-Amz-SignedHeaders": "host",
  };
  const canonicalQuery = Object.keys(query)
    .sort()
    .map((k) => `${encode(k)}=${encode(query[k]!)}`)
    .join("&");
  const canonical = ["GET", path, canonicalQuery, `host:${url.host}`, "", "host", "UNSIGNED-PAYLOAD"].join(
    "\n",
  );
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  const signature = createHmac("sha256", signingKey(bucket, day)).update(toSign).digest("hex");
  return `${url.origin}${path}?${canonicalQuery}&X-Amz-Signature=${signature}`;
}

/**
 * Settings of a service that hands out artifacts: an S3-compatible bucket to keep them in, where
 * a user has one (every setting named, or none: then the service serves its artifacts itself).
 */
export const ArtifactsEnv = z.object({
  ARTIFACTS_S3_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "An S3-compatible bucket for artifacts, path style (https://s3.example.com/bucket); unset: the service serves them",
    ),
  ARTIFACTS_S3_REGION: z.string().min(1).default("us-east-1"),
  ARTIFACTS_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  ARTIFACTS_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
});
export type ArtifactsEnv = z.infer<typeof ArtifactsEnv>;

/** The bucket these settings name, or undefined; a bucket without both keys names what is missing. */
export function artifactBucket(env: ArtifactsEnv, service: string): S3Bucket | undefined {
  if (!env.ARTIFACTS_S3_URL) return undefined;
  const missing = (["ARTIFACTS_S3_ACCESS_KEY_ID", "ARTIFACTS_S3_SECRET_ACCESS_KEY"] as const).filter(
    (k) => !env[k],
  );
  if (missing.length > 0)
    throw new EnvError(
      service,
      missing.map((k) => `${k}: required with ARTIFACTS_S3_URL (not set)`),
    );
  return {
    url: env.ARTIFACTS_S3_URL,
    region: env.ARTIFACTS_S3_REGION,
    accessKeyId: env.ARTIFACTS_S3_ACCESS_KEY_ID!,
    secretAccessKey: env.ARTIFACTS_S3_SECRET_ACCESS_KEY!,
  };
}
