import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdirSync, rmSync } from "node:fs";
import { readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ArtifactRef } from "@bridle/contracts";
import { createRoute, z } from "@hono/zod-openapi";
import { createRouter } from "./app.ts";
import { httpError } from "./errors.ts";
import { errorContent } from "./openapi.ts";
import { presignedGet, type S3Bucket, signedRequest } from "./s3.ts";

const SHA256 = /^[0-9a-f]{64}$/;

/**
 * Content-addressed files a service hands to others by reference: each stored once under its
 * sha256 until every holder has released it. Holders are counted, so two rollouts whose workspaces
 * pack to the same bytes share one file safely. By default the files lie in the service's folder and
 * are served by it over HTTP (`artifactRoutes`); with an S3-compatible bucket they are put there
 * instead and a reference is a presigned URL, so a reader needs neither the service nor credentials.
 * What a restarted service left in its folder is cleared when its store is made.
 */
export class ArtifactStore {
  private readonly holders = new Map<string, number>();
  private readonly baseUrl: string;

  /**
   * The store in `dir`, emptied (references a previous process handed out died with it), served
   * under `baseUrl` (where `artifactRoutes` are mounted, as others reach it); or, given `s3`, kept
   * in that bucket (`dir` then only stages each file while its hash is taken).
   */
  constructor(
    readonly dir: string,
    baseUrl: string,
    private readonly s3?: S3Bucket,
  ) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    this.baseUrl = baseUrl.replace(/\/+$/, "");
  }

  /** Stores what `source` yields and returns its reference; release it when its reader is done. */
  async put(source: Readable | AsyncIterable<Uint8Array>): Promise<ArtifactRef> {
    const partial = join(this.dir, `.partial-${randomBytes(6).toString("hex")}`);
    const seen = measure();
    try {
      await pipeline(source, seen.stream, createWriteStream(partial));
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    const { sha256, bytes } = seen.result();
    if (this.s3) {
      try {
        if (!this.holders.has(sha256)) await this.upload(this.s3, partial, sha256, bytes);
      } finally {
        await rm(partial, { force: true });
      }
      this.holders.set(sha256, (this.holders.get(sha256) ?? 0) + 1);
      return { url: presignedGet(this.s3, objectKey(sha256), PRESIGNED_SECONDS), sha256, bytes };
    }
    await rename(partial, this.file(sha256));
    this.holders.set(sha256, (this.holders.get(sha256) ?? 0) + 1);
    return { url: `${this.baseUrl}/${sha256}`, sha256, bytes };
  }

  private async upload(bucket: S3Bucket, file: string, sha256: string, bytes: number): Promise<void> {
    const request = signedRequest(bucket, "PUT", objectKey(sha256), {
      payloadSha256: sha256,
      headers: { "content-length": String(bytes) },
    });
    const res = await fetch(request.url, {
      method: "PUT",
      headers: request.headers,
      body: Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>,
      duplex: "half",
      signal: AbortSignal.timeout(600_000),
    } as RequestInit).catch((err: unknown) => {
      throw new ArtifactError(
        "artifact_unavailable",
        `cannot reach the bucket at ${bucket.url}: ${(err as Error).message}`,
      );
    });
    if (!res.ok)
      throw new ArtifactError(
        "artifact_unavailable",
        `the bucket at ${bucket.url} refused ${sha256}: ${res.status} ${(await res.text()).slice(0, 300)}`,
      );
  }

  /** The stored file of `sha256`, or null when none is held here (always null with a bucket). */
  find(sha256: string): string | null {
    return !this.s3 && SHA256.test(sha256) && this.holders.has(sha256) ? this.file(sha256) : null;
  }

  /** One holder is done with `ref`: the file goes when the last one is. */
  async release(ref: ArtifactRef): Promise<void> {
    const left = (this.holders.get(ref.sha256) ?? 1) - 1;
    if (left > 0) return void this.holders.set(ref.sha256, left);
    this.holders.delete(ref.sha256);
    if (!this.s3) return rm(this.file(ref.sha256), { force: true });
    const request = signedRequest(this.s3, "DELETE", objectKey(ref.sha256));
    // A delete that fails leaves an object behind, nothing worse: the bucket's lifecycle rules clear it.
    await fetch(request.url, {
      method: "DELETE",
      headers: request.headers,
      signal: AbortSignal.timeout(30_000),
    })
      .then((res) => res.body?.cancel())
      .catch(() => undefined);
  }

  /** How many artifacts are held (for tests and health). */
  async count(): Promise<number> {
    if (this.s3) return this.holders.size;
    return (await readdir(this.dir)).filter((name) => name.endsWith(".bin")).length;
  }

  private file(sha256: string): string {
    return join(this.dir, `${sha256}.bin`);
  }
}

/** How long a presigned reference reads its object: a rollout's verification, or an image's transfer. */
const PRESIGNED_SECONDS = 24 * 3600;
const objectKey = (sha256: string) => `artifacts/${sha256}`;

/** `GET /artifacts/{sha256}`: a held artifact's bytes, streamed. */
export function artifactRoutes(store: ArtifactStore) {
  return createRouter().openapi(
    createRoute({
      method: "get",
      path: "/artifacts/{sha256}",
      summary: "An artifact this service hands out by reference (a packed workspace), by its sha256",
      request: { params: z.object({ sha256: z.string().regex(SHA256, "a sha256 in hex") }) },
      responses: {
        200: {
          description: "The artifact's bytes",
          content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } },
        },
        404: errorContent("No such artifact held here (never stored, or released)"),
      },
    }),
    (c) => {
      const { sha256 } = c.req.valid("param");
      const file = store.find(sha256);
      if (!file) throw httpError(404, "artifact_not_found", `no artifact ${sha256} is held here`);
      const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
      return c.body(body, 200, { "content-type": "application/octet-stream" });
    },
  );
}

/**
 * A pass-through that measures what flows (sha256 and size); given what to expect, it fails the
 * stream as soon as there are more bytes, or at the end when they are not the expected ones.
 */
function measure(expected?: ArtifactRef) {
  const hash = createHash("sha256");
  let bytes = 0;
  let sha256 = "";
  const mismatch = (sent: string) =>
    new ArtifactError(
      "content_mismatch",
      `${expected?.url} sent ${sent}, not the ${expected?.bytes} bytes of ${expected?.sha256}`,
    );
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      if (expected && bytes > expected.bytes) return done(mismatch(`more than ${expected.bytes} bytes`));
      done(null, chunk);
    },
    flush(done) {
      sha256 = hash.digest("hex");
      if (expected && (bytes !== expected.bytes || sha256 !== expected.sha256))
        return done(mismatch(`${bytes} bytes with sha256 ${sha256}`));
      done();
    },
  });
  return { stream, result: () => ({ sha256, bytes }) };
}

/** Why an artifact could not be read: gone (404), unreachable, or not the bytes its reference names. */
export class ArtifactError extends Error {
  constructor(
    readonly code: "artifact_not_found" | "artifact_unavailable" | "content_mismatch",
    message: string,
  ) {
    super(message);
    this.name = "ArtifactError";
  }
}

/**
 * Reads an artifact by reference as a stream that fails with an ArtifactError, at its end, when
 * its bytes are not the ones `ref` names (so whoever consumes it must treat what it wrote as lost).
 */
export async function fetchArtifact(ref: ArtifactRef, timeoutMs = 600_000): Promise<Readable> {
  const response = await fetch(ref.url, { signal: AbortSignal.timeout(timeoutMs) }).catch((err: unknown) => {
    throw new ArtifactError("artifact_unavailable", `cannot reach ${ref.url}: ${(err as Error).message}`);
  });
  if (response.status === 404)
    throw new ArtifactError("artifact_not_found", `${ref.url} holds no artifact ${ref.sha256}`);
  if (!response.ok || !response.body)
    throw new ArtifactError("artifact_unavailable", `${ref.url} answered ${response.status}`);
  const check = measure(ref).stream;
  const source = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  // A connection cut mid-transfer fails the check stream too (pipe alone would leave it waiting).
  source.on("error", (err) =>
    check.destroy(new ArtifactError("artifact_unavailable", `${ref.url} broke off: ${err.message}`)),
  );
  // A small artifact can be read whole, and fail its check, before anyone consumes the stream: the
  // error stays on it (`errored`) for its reader, instead of escaping as an uncaught exception.
  check.on("error", () => undefined);
  return source.pipe(check);
}
