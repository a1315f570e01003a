import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { link, lstat, mkdir, readdir, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";

/**
 * One copy of each file that unpacked images have in common. Task images are mostly their base
 * (Debian, a toolchain), and each is unpacked whole for the sandbox to lie an overlay on, so
 * without sharing every image would hold its own copy of the base. After an image is unpacked,
 * each of its regular files becomes a hard link to the store's copy of the same bytes with the
 * same mode, owner and modification time, and the store takes in the ones it did not have.
 *
 * Safe because an image's filesystem is never written: sandboxes see it only as an overlay's lower
 * layer, and workspaces are copied out of it. Two images' identical files are then one inode,
 * which nothing in a sandbox can tell apart from two.
 */

export interface Shared {
  /** Regular files looked at. */
  files: number;
  /** Bytes the image no longer holds a copy of (its files that the store already had). */
  bytesShared: number;
  /** Store entries this image added (see `sweepStore`). */
  added: string[];
}

/** How many files are hashed and linked at once (reads overlap; the work is mostly the disk's). */
const PARALLEL = 8;

/** Shares `rootfs`'s regular files with the store in `storeDir` (same filesystem). */
export async function shareFiles(rootfs: string, storeDir: string): Promise<Shared> {
  const shared: Shared = { files: 0, bytesShared: 0, added: [] };
  const files: string[] = [];
  const dirs = [rootfs];
  for (let dir = dirs.pop(); dir !== undefined; dir = dirs.pop()) {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) dirs.push(path);
      else if (entry.isFile()) files.push(path);
    }
  }
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < files.length; i = next++) await shareOne(files[i]!, storeDir, shared);
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return shared;
}

async function shareOne(path: string, storeDir: string, shared: Shared): Promise<void> {
  const meta = await lstat(path, { bigint: true });
  shared.files++;
  // An empty file costs an inode and no block: nothing to share.
  if (meta.size === 0n) return;
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash);
  const digest = hash.digest("hex");
  const key = `${digest}-${meta.mode.toString(8)}-${meta.uid}-${meta.gid}-${meta.mtimeNs}`;
  const fan = join(storeDir, digest.slice(0, 2));
  const entry = join(fan, key);
  for (let attempt = 0; attempt < 3; attempt++) {
    const stored = await lstat(entry, { bigint: true }).catch(() => null);
    if (stored) {
      if (stored.ino === meta.ino && stored.dev === meta.dev) return;
      // Linked beside the file, then renamed over it: the path always holds one or the other.
      const temporary = `${path}.bridle-shared`;
      try {
        await link(entry, temporary);
      } catch (err) {
        // Swept between the look and the link: take the file in instead.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw err;
      }
      await rename(temporary, path);
      shared.bytesShared += Number(meta.size);
      return;
    }
    try {
      await link(path, entry);
      shared.added.push(entry);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") await mkdir(fan, { recursive: true });
      else if (code !== "EEXIST") throw err; // another image took the same file in first
    }
  }
}

/**
 * Removes the store entries that no image links to any more (only the store's own link left),
 * among `entries`, or the whole store when none are named. Returns the bytes freed.
 */
export async function sweepStore(storeDir: string, entries?: string[]): Promise<number> {
  let freed = 0;
  for (const entry of entries ?? (await storeEntries(storeDir))) {
    const meta = await lstat(entry).catch(() => null);
    if (meta?.nlink === 1) {
      await unlink(entry).catch(() => undefined);
      freed += meta.size;
    }
  }
  return freed;
}

/** The bytes the store's copies take: every file that unpacked images hold, counted once. */
export async function storeBytes(storeDir: string): Promise<number> {
  let total = 0;
  for (const entry of await storeEntries(storeDir))
    total += (await lstat(entry).catch(() => null))?.size ?? 0;
  return total;
}

/** Every copy in the store, by path (the store fans out by the digest's first two characters). */
async function storeEntries(storeDir: string): Promise<string[]> {
  const entries: string[] = [];
  for (const fan of await readdir(storeDir).catch(() => [] as string[]))
    for (const name of await readdir(join(storeDir, fan)).catch(() => [] as string[]))
      entries.push(join(storeDir, fan, name));
  return entries;
}
