/** Keeps the last `limit` bytes of a stream, so a chatty process cannot exhaust memory. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limit && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length;
      this.truncated = true;
    }
    if (this.size > this.limit) {
      const only = this.chunks[0]!;
      this.chunks = [only.subarray(only.length - this.limit)];
      this.size = this.limit;
      this.truncated = true;
    }
  }

  toString(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }
}
