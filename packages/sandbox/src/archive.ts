import { spawn } from "node:child_process";
import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

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
 * Unpacks a tar made by packFolder into `dir` (which exists). Fails when the stream does (say, its
 * bytes were not those of their reference) or tar does; what was unpacked by then is the caller's
 * to remove.
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
    tar.on("error", reject);
    tar.on("close", resolve);
  });
  try {
    await pipeline(archive, tar.stdin);
  } catch (err) {
    tar.kill("SIGKILL");
    await exited.catch(() => undefined);
    throw err;
  }
  const code = await exited;
  if (code !== 0) throw new Error(`tar could not unpack into ${dir} (exit ${code}): ${stderr.trim()}`);
}
