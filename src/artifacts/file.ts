// The private file behind one artifact: created 0600 in the temp directory with an unguessable name and
// unlinked at once, so only this process's descriptor reaches the bytes and a crash leaves nothing.
import { constants } from "node:fs";
import { type FileHandle, open, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export class PrivateFile {
  private constructor(private readonly handle: FileHandle) {}

  static async create(): Promise<PrivateFile> {
    const path = join(tmpdir(), `.repl-mcp-artifact-${crypto.randomUUID()}`);
    const flags = constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    const handle = await open(path, flags, 0o600);
    try {
      await unlink(path);
    } catch (error) {
      await handle.close();
      throw error;
    }
    return new PrivateFile(handle);
  }

  async write(data: Uint8Array, position: number): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.handle.write(data, done, data.length - done, position + done);
      done += bytesWritten;
    }
  }

  /** Up to `length` bytes from `position`; fewer only at the end of the file. */
  async read(position: number, length: number): Promise<Uint8Array> {
    const buffer = Buffer.alloc(length);
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.handle.read(buffer, done, length - done, position + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return buffer.subarray(0, done);
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => {});
  }
}
