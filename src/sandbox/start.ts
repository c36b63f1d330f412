// --sandbox at start: the person's policy (or the built-in one alone), what repl-mcp keeps secret on this
// machine, and the sandbox proven to contain. Loaded only with the flag: a server without it never pages
// in the sandbox runtime.
import { homedir } from "node:os";
import { join } from "node:path";
import { ReplError } from "../errors.ts";
import { ensurePrivateDirectory } from "../fs/private-dir.ts";
import { cacheDirectory, runtimeDirectory } from "../fs/user-dirs.ts";
import type { ServerSecrets } from "./builtin.ts";
import { BUILTIN_POLICY, entryPath, loadPolicy } from "./policy.ts";
import { Sandbox, within } from "./sandbox.ts";

export interface ContainOptions {
  /** The policy file; undefined: the built-in policy alone. */
  policy: string | undefined;
  project: string;
  /** --config's registry. */
  config: string | undefined;
  /** --journal's file. */
  journal: string | undefined;
  /** The kernel servers file and its token files. */
  kernelFiles: string[];
}

export async function containCells(options: ContainOptions): Promise<Sandbox> {
  const policy = options.policy === undefined ? BUILTIN_POLICY : loadPolicy(options.policy);
  // A denied place must exist when a worker starts to be hidden from it; this one is made now.
  const runtime = runtimeDirectory();
  ensurePrivateDirectory(runtime, `The runtime directory ${runtime}`);
  // The registries: the broker's credentials may be written in them, and a cell that could write one would
  // add a server (a command the broker runs outside the sandbox). ~/.claude.json is Claude Code's.
  const registries = [
    options.config ?? join(options.project, ".mcp.json"),
    join(process.env.HOME || homedir(), ".claude.json"),
  ];
  const secrets: ServerSecrets = {
    readDenied: [
      runtime,
      ...registries,
      ...options.kernelFiles,
      ...(options.journal ? [options.journal] : []),
    ],
    writeDenied: [
      cacheDirectory(),
      runtime,
      ...registries,
      ...options.kernelFiles,
      ...(options.journal ? [options.journal] : []),
    ],
  };
  for (const entry of policy.allowRead) {
    const path = entryPath(entry);
    const secret = secrets.readDenied.find((denied) => within(path, denied));
    if (secret !== undefined) {
      throw new ReplError(
        "CONFIG_INVALID",
        `Sandbox policy: "filesystem.allowRead" entry ${path} would let cells read ${secret}, which repl-mcp keeps secret`,
      );
    }
  }
  return await Sandbox.start(policy, secrets);
}
