// Saving an artifact to disk: the bytes go to a private temp file beside the destination, are flushed,
// and only then appear under the destination's name — by a hard link when the name must not exist yet
// (the kernel refuses atomically if it does), or by a rename over it when overwriting was asked for.
import { constants } from "node:fs";
import { link, open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ReplError } from "../errors.ts";
import { openedPath } from "../fs/opened-path.ts";
import { ArtifactMessages } from "./reference.ts";

/** `opened` may refuse the directory the temp file really landed in (see ArtifactStore.importFile). */
export async function saveBeside(
  destination: string,
  bytes: Uint8Array,
  overwrite: boolean,
  opened?: (realPath: string) => void,
): Promise<void> {
  const directory = dirname(destination);
  if (!basename(destination)) throw new ReplError("ARTIFACT_PATH", ArtifactMessages.destinationRelative);
  const temp = join(directory, `.repl-artifact-save-${crypto.randomUUID()}`);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    handle = await open(temp, flags, 0o600);
  } catch (error) {
    throw new ReplError(
      "ARTIFACT_SAVE",
      `Artifact destination directory cannot be written (${(error as { code?: string }).code ?? "error"}): ${directory}`,
    );
  }
  try {
    try {
      const real = opened ? openedPath(handle.fd) : undefined;
      if (real !== undefined) opened?.(join(dirname(real), basename(destination)));
      await handle.write(bytes, 0, bytes.length, 0);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (overwrite) {
      try {
        await rename(temp, destination);
      } catch (error) {
        throw new ReplError(
          "ARTIFACT_SAVE",
          `Artifact could not replace the destination (${(error as { code?: string }).code ?? "error"})`,
        );
      }
    } else {
      try {
        await link(temp, destination);
      } catch {
        throw new ReplError("ARTIFACT_EXISTS", ArtifactMessages.destinationExists);
      }
    }
  } finally {
    await unlink(temp).catch(() => {});
  }
  await syncDirectory(directory);
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, constants.O_RDONLY).catch(() => undefined);
  if (!handle) return;
  await handle.sync().catch(() => {});
  await handle.close();
}
