import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { type ServerType, serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRouter } from "./app.ts";
import { ArtifactError, ArtifactStore, artifactRoutes, fetchArtifact } from "./artifacts.ts";

const PORT = 19381;
let dir: string;
let store: ArtifactStore;
let server: ServerType;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-artifacts-"));
  store = new ArtifactStore(join(dir, "store"), `http://127.0.0.1:${PORT}/v1/artifacts/`);
  server = serve({
    fetch: createRouter().route("/v1", artifactRoutes(store)).fetch,
    hostname: "127.0.0.1",
    port: PORT,
  });
});
afterAll(async () => {
  server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("artifacts by reference", () => {
  it("stores bytes under their sha256, serves them over HTTP, and keeps them until the last holder releases them", async () => {
    const first = await store.put(Readable.from([Buffer.from("a workspace")]));
    const second = await store.put(Readable.from([Buffer.from("a "), Buffer.from("workspace")]));
    expect(second).toEqual(first);
    expect(first).toMatchObject({ bytes: 11, url: `http://127.0.0.1:${PORT}/v1/artifacts/${first.sha256}` });
    expect(await text(await fetchArtifact(first))).toBe("a workspace");
    await store.release(first);
    expect(await text(await fetchArtifact(first))).toBe("a workspace"); // still held once
    await store.release(second);
    expect(await store.count()).toBe(0);
    await expect(fetchArtifact(first)).rejects.toMatchObject({ code: "artifact_not_found" });
  });

  it("fails the reader's stream when the bytes are not the referenced ones, and names an unreachable owner", async () => {
    const held = await store.put(Readable.from([Buffer.from("the real bytes")]));
    const forged = { ...held, sha256: "f".repeat(64) };
    const read = text(await fetchArtifact(forged));
    await expect(read).rejects.toBeInstanceOf(ArtifactError);
    await expect(read).rejects.toMatchObject({ code: "content_mismatch" });
    // Read late: the whole artifact arrives, and fails its check, before its reader starts.
    const late = await fetchArtifact(forged);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expect(text(late)).rejects.toMatchObject({ code: "content_mismatch" });
    const shorter = { ...held, bytes: 4 };
    await expect(text(await fetchArtifact(shorter))).rejects.toMatchObject({ code: "content_mismatch" });
    const elsewhere = { ...held, url: "http://127.0.0.1:19389/v1/artifacts/x" };
    await expect(fetchArtifact(elsewhere)).rejects.toMatchObject({ code: "artifact_unavailable" });
    await store.release(held);
  });

  it("starts empty: what a previous process handed out died with it, and a failed put leaves nothing", async () => {
    const held = await store.put(Readable.from([Buffer.from("left behind")]));
    const again = new ArtifactStore(join(dir, "store"), "http://127.0.0.1:1/v1/artifacts");
    expect(existsSync(join(dir, "store", `${held.sha256}.bin`))).toBe(false);
    const broken = Readable.from(
      (async function* () {
        yield Buffer.from("half");
        throw new Error("the packer died");
      })(),
    );
    await expect(again.put(broken)).rejects.toThrow("the packer died");
    expect(await again.count()).toBe(0);
  });
});
