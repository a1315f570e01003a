import { spawn } from "node:child_process";
import { once } from "node:events";
import { PassThrough, type Readable } from "node:stream";

/**
 * How folders are packed for another service: POSIX tar with sparse files, numeric owners, and the
 * overlay's own extended attributes (an image sandbox's `changes` marks deleted files and replaced
 * folders with them), so what is unpacked is the folder as it was, FIFOs and device nodes included.
 */
const TAR_FORMAT = [
  "--format=posix",
  "--sparse",
  "--numeric-owner",
  "--xattrs",
  "--xattrs-include=trusted.overlay.*",
];

/** `dir` packed as one tar, streamed; the stream fails if tar does. */
export function packFolder(dir: string): Readable {
  const tar = spawn("tar", ["--create", "--file=-", ...TAR_FORMAT, "--directory", dir, "."], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  tar.stderr.on("data", (b: Buffer) => {
    stderr = (stderr + b.toString("utf8")).slice(-4_000);
  });
  // The archive ends only once tar has said it succeeded: a failed pack never looks complete.
  const archive = new PassThrough();
  tar.stdout.pipe(archive, { end: false });
  const ended = new Promise<void>((resolve) => tar.stdout.once("end", resolve));
  const exited = new Promise<number | null>((resolve, reject) => {
    tar.once("error", reject);
    tar.once("close", resolve);
  });
  Promise.all([exited, ended]).then(
    ([code]) =>
      code === 0
        ? archive.end()
        : archive.destroy(new Error(`tar could not pack ${dir} (exit ${code}): ${stderr.trim()}`)),
    (err: Error) => archive.destroy(new Error(`tar could not pack ${dir}: ${err.message}`)),
  );
  // A reader that gives up stops tar.
  archive.once("close", () => {
    if (tar.exitCode === null) tar.kill("SIGKILL");
  });
  return archive;
}

/**
 * Unpacks a tar made by packFolder into `dir` (which exists). Reads the archive to its end even
 * when tar has all it needs before (it stops at the end-of-archive blocks and may exit with the
 * last record's padding unread), so a stream that checks its bytes at the end still does. Fails
 * when the stream does (its bytes were not those of their reference) or tar does; what was
 * unpacked by then is the caller's to remove.
 */
export async function unpackFolder(archive: Readable, dir: string): Promise<void> {
  const tar = spawn("tar", ["--extract", "--file=-", ...TAR_FORMAT, "--directory", dir], {
    stdio: ["pipe", "ignore", "pipe"],
  });
  let stderr = "";
  tar.stderr.on("data", (b: Buffer) => {
    stderr = (stderr + b.toString("utf8")).slice(-4_000);
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    tar.once("error", reject);
    tar.once("close", resolve);
  });
  // A tar that exited closed its end of the pipe: what is left of the archive is only read.
  let writable = true;
  tar.stdin.on("error", () => {
    writable = false;
  });
  const gone = exited.then(
    () => undefined,
    () => undefined,
  );
  try {
    for await (const chunk of archive) {
      if (!writable || tar.stdin.destroyed) continue;
      if (!tar.stdin.write(chunk))
        await Promise.race([once(tar.stdin, "drain").catch(() => undefined), gone]);
    }
    tar.stdin.end();
  } catch (err) {
    tar.kill("SIGKILL");
    await gone;
    throw err;
  }
  const code = await exited;
  if (code !== 0) throw new Error(`tar could not unpack into ${dir} (exit ${code}): ${stderr.trim()}`);
}
