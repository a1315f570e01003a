import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactError, ArtifactStore, fetchArtifact } from "./artifacts.ts";
import { EnvError } from "./env.ts";
import { ArtifactsEnv, artifactBucket, presignedGet, type S3Bucket, signedRequest } from "./s3.ts";

/**
 * Artifacts kept in an S3-compatible bucket. The bucket is s3rver, a STAND-IN for S3 (an external
 * service) that speaks its protocol over real HTTP but checks no signature: the signatures are
 * checked against the examples AWS publishes for Signature Version 4.
 */
let dir: string;
let server: S3rver;
let bucket: S3Bucket;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-s3-"));
  server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: join(dir, "s3"),
    configureBuckets: [{ name: "bridle", configs: [] }],
  });
  const { port } = await server.run();
  bucket = {
    url: `http://127.0.0.1:${port}/bridle`,
    region: "us-east-1",
    accessKeyId: "S3RVER",
    secretAccessKey: "S3RVER",
  };
});
afterAll(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("AWS Signature Version 4", () => {
  const example: S3Bucket = {
    url: "https://examplebucket.s3.amazonaws.com",
    region: "us-east-1",
    accessKeyId: "AKIAIOSFODNN7EXAMPLE",
    secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  };
  const now = new Date("2013-05-24T00:00:00Z");

  it("signs a GET in its headers as AWS's example does", () => {
    const { headers } = signedRequest(example, "GET", "test.txt", { headers: { Range: "bytes=0-9" }, now });
    expect(headers.authorization).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    );
  });

  it("presigns a GET as AWS's example does", () => {
    expect(presignedGet(example, "test.txt", 86_400, now)).toBe(
      "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
    );
  });
});

describe("artifacts in an S3-compatible bucket (s3rver stand-in)", () => {
  it("puts each artifact once under its sha256, hands out a presigned URL, and deletes it after the last holder", async () => {
    const store = new ArtifactStore(join(dir, "staging"), "http://unused.invalid/v1/artifacts", bucket);
    const first = await store.put(Readable.from([Buffer.from("a packed image")]));
    const second = await store.put(Readable.from([Buffer.from("a packed "), Buffer.from("image")]));
    expect(second).toEqual(first);
    expect(
      first.url.startsWith(`${bucket.url}/artifacts/${first.sha256}?X-Amz-Algorithm=AWS4-HMAC-SHA256`),
    ).toBe(true);
    // A reader needs nothing but the reference: no credentials, not the service that stored it.
    expect(await text(await fetchArtifact(first))).toBe("a packed image");
    expect(store.find(first.sha256)).toBeNull();
    await store.release(first);
    expect(await text(await fetchArtifact(first))).toBe("a packed image"); // still held once
    await store.release(second);
    await expect(fetchArtifact(first)).rejects.toMatchObject({ code: "artifact_not_found" });
    expect(await store.count()).toBe(0);
  });

  it("says which bucket refused an artifact, and which settings are missing", async () => {
    const store = new ArtifactStore(join(dir, "staging-2"), "http://unused.invalid/v1/artifacts", {
      ...bucket,
      url: bucket.url.replace(/bridle$/, "no-such-bucket"),
    });
    await expect(store.put(Readable.from([Buffer.from("x")]))).rejects.toThrow(ArtifactError);
    await expect(store.put(Readable.from([Buffer.from("x")]))).rejects.toThrow(/no-such-bucket refused/);
    const settings = ArtifactsEnv.parse({ ARTIFACTS_S3_URL: bucket.url, ARTIFACTS_S3_ACCESS_KEY_ID: "k" });
    expect(() => artifactBucket(settings, "runner")).toThrow(EnvError);
    expect(() => artifactBucket(settings, "runner")).toThrow(/ARTIFACTS_S3_SECRET_ACCESS_KEY: required/);
    expect(artifactBucket(ArtifactsEnv.parse({}), "runner")).toBeUndefined();
  });
});
