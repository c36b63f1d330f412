// The private file behind one artifact: created 0600 in the temp directory with an unguessable name and
// unlinked at once, so only this process's descriptor reaches the bytes and a crash leaves nothing. Or
// a worker's own unnamed file, adopted through /proc (see adopt()).
import { constants, readSync } from "node:fs";
import { type FileHandle, open, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fail } from "./content.ts";
import { ArtifactMessages as M } from "./reference.ts";

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

  /**
   * Opens the file a worker (process `pid`) holds at descriptor `fd`, for an upload whose bytes the
   * worker writes there itself. It must be a regular file of this user that nobody else may access, empty, and unnamed
   * (made with O_TMPFILE, never linked): no other user can open or replace it, only processes allowed
   * to read the worker's /proc entry reach it, and it vanishes with the last descriptor however either
   * process ends. Opened through the kernel's link to the worker's descriptor, not through any path.
   */
  static async adopt(pid: number, fd: number): Promise<PrivateFile> {
    if (process.platform !== "linux") throw fail(M.handoverUnavailable, "ARTIFACT_HANDOVER");
    let handle: FileHandle;
    try {
      handle = await open(
        `/proc/${pid}/fd/${fd}`,
        constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY,
      );
    } catch {
      throw fail(M.handoverRefused, "ARTIFACT_HANDOVER");
    }
    const stat = await handle.stat().catch(() => undefined);
    const acceptable =
      stat?.isFile() &&
      stat.nlink === 0 &&
      stat.size === 0 &&
      stat.uid === process.geteuid?.() &&
      (stat.mode & 0o077) === 0;
    if (!acceptable) {
      await handle.close().catch(() => {});
      throw fail(M.handoverRefused, "ARTIFACT_HANDOVER");
    }
    return new PrivateFile(handle);
  }

  /** The file's size now (a handed-over file is written by the worker). */
  async size(): Promise<number> {
    return (await this.handle.stat()).size;
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
    const buffer = Buffer.allocUnsafe(length);
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.handle.read(buffer, done, length - done, position + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return buffer.subarray(0, done);
  }

  /**
   * Fills `buffer` from `position`, synchronously, and returns how many bytes it got (fewer only at the
   * end of the file). For the pieces of a handed-over upload: they are in the page cache already, and a
   * trip through the thread pool per piece costs more than the copy.
   */
  readInto(buffer: Uint8Array, position: number): number {
    let done = 0;
    while (done < buffer.length) {
      const bytesRead = readSync(this.handle.fd, buffer, done, buffer.length - done, position + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return done;
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => {});
  }
}
