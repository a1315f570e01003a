import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";

/** A file of a task folder, relative to that folder. */
export interface TreeFile {
  path: string;
  mode: number;
  content: Buffer;
}

/** Every regular file under `dir`, sorted by path. Links are refused: they could point anywhere. */
export async function readTree(dir: string, root = dir): Promise<TreeFile[]> {
  const files: TreeFile[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await readTree(full, root)));
    else if (entry.isFile()) {
      const stat = await lstat(full);
      files.push({ path: relative(root, full), mode: stat.mode & 0o7777, content: await readFile(full) });
    } else {
      throw new Error(`${relative(root, full)}: not a regular file or folder (links are not allowed)`);
    }
  }
  return files;
}

/** sha256 over paths, executable bits and contents: the identity of a task's version. */
export function hashTree(files: TreeFile[]): string {
  const hash = createHash("sha256");
  for (const file of files) {
    hash.update(`${file.path}\0${file.mode & 0o111 ? "x" : "-"}\0${file.content.length}\0`);
    hash.update(file.content);
  }
  return hash.digest("hex");
}

/** Writes files (relative paths) under `dir`, refusing any path that would leave it. */
export async function writeTree(dir: string, files: TreeFile[]): Promise<void> {
  const root = resolve(dir);
  for (const file of files) {
    const target = resolve(root, file.path);
    if (!target.startsWith(`${root}/`)) throw new Error(`${file.path}: path leaves the folder`);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, file.content, { mode: file.mode & 0o777 });
  }
}

/** Decodes files as the tasks service sends them (base64 over JSON). */
export function fromTaskFiles(files: { path: string; mode: number; base64: string }[]): TreeFile[] {
  return files.map((f) => ({ path: f.path, mode: f.mode, content: Buffer.from(f.base64, "base64") }));
}
