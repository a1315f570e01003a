import { execFileSync } from "node:child_process";
import { lstatSync, mkdirSync, readFileSync, readlinkSync, utimesSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packFolder, unpackFolder } from "./archive.ts";

let dir: string;
let source: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-archive-"));
  source = join(dir, "source");
  mkdirSync(join(source, "src", "deep"), { recursive: true });
  writeFileSync(join(source, "src", "deep", "main.py"), "print('hi')\n");
  writeFileSync(join(source, "big.bin"), Buffer.alloc(3 << 20, 7));
  execFileSync("ln", ["-s", "src/deep/main.py", join(source, "link.py")]);
  execFileSync("mkfifo", [join(source, "pipe")]);
  utimesSync(join(source, "src", "deep", "main.py"), 1_000_000, 1_000_000);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const fresh = (name: string) => {
  const out = join(dir, name);
  mkdirSync(out);
  return out;
};

describe("a folder packed for another service and unpacked there", () => {
  it("comes back as it was: files, times, links and FIFOs", async () => {
    const out = fresh("plain");
    await unpackFolder(packFolder(source), out);
    expect(readFileSync(join(out, "src", "deep", "main.py"), "utf8")).toBe("print('hi')\n");
    expect(lstatSync(join(out, "src", "deep", "main.py")).mtimeMs).toBe(1_000_000_000);
    expect(readFileSync(join(out, "big.bin")).equals(Buffer.alloc(3 << 20, 7))).toBe(true);
    expect(readlinkSync(join(out, "link.py"))).toBe("src/deep/main.py");
    expect(lstatSync(join(out, "pipe")).isFIFO()).toBe(true);
  });

  it("reads the archive to its end after tar has all it needs, so a check at its end still runs", async () => {
    // tar stops at the end-of-archive blocks; what follows (here 4 MiB) used to hit a closed pipe.
    const archive = await buffer(packFolder(source));
    let read = 0;
    const stream = Readable.from(
      (async function* () {
        for (const chunk of [archive, Buffer.alloc(4 << 20)]) {
          read += chunk.length;
          yield chunk;
        }
      })(),
    );
    await unpackFolder(stream, fresh("trailing"));
    expect(read).toBe(archive.length + (4 << 20));
    expect(readFileSync(join(dir, "trailing", "src", "deep", "main.py"), "utf8")).toBe("print('hi')\n");
  });

  it("fails with the stream's own error when the bytes stop being right, and names what tar could not pack", async () => {
    const archive = await buffer(packFolder(source));
    const broken = Readable.from(
      (async function* () {
        yield archive.subarray(0, 4096);
        throw new Error("not the referenced bytes");
      })(),
    );
    await expect(unpackFolder(broken, fresh("broken"))).rejects.toThrow("not the referenced bytes");
    await expect(buffer(packFolder(join(dir, "nowhere")))).rejects.toThrow(/tar could not pack .*nowhere/);
  });
});
