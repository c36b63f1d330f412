// The person's sandbox policy (--sandbox FILE or REPL_MCP_SANDBOX=FILE; docs/sandbox.md): a file in the
// format of the sandbox runtime's own settings, limited to the fields repl-mcp honours, so one policy can
// be shared with that runtime's CLI. It is read once at start and refused there, naming the field (never a
// value): a policy that does not hold must not become a weaker one in silence.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, resolve } from "node:path";
import * as v from "valibot";
import { describe, ReplError } from "../errors.ts";
import { SANDBOX_POLICY_MAX_BYTES } from "../limits.ts";
import { checkRuntimeSettings, type PathEntry } from "./runtime.ts";

/** A path, or one marked to be read as nothing but a name (the runtime's `{ path, literal: true }`). */
const PathEntrySchema = v.union([
  v.pipe(v.string(), v.minLength(1)),
  v.strictObject({ path: v.pipe(v.string(), v.minLength(1)), literal: v.literal(true) }),
]);

const Paths = v.optional(v.array(PathEntrySchema));
const Hosts = v.optional(v.array(v.pipe(v.string(), v.minLength(1))));

const PolicyFile = v.strictObject({
  network: v.optional(
    v.strictObject({
      allowedDomains: Hosts,
      deniedDomains: Hosts,
      /** Hosts on neither list are refused without asking anyone. */
      strictAllowlist: v.optional(v.boolean()),
    }),
  ),
  filesystem: v.optional(
    v.strictObject({ denyRead: Paths, allowRead: Paths, allowWrite: Paths, denyWrite: Paths }),
  ),
});

/** What the person's policy adds to the built-in one (builtin.ts); every path absolute. */
export interface Policy {
  /** Where it came from: a file, or the built-in policy alone. */
  source: string;
  allowedDomains: string[];
  deniedDomains: string[];
  strictAllowlist: boolean;
  denyRead: PathEntry[];
  allowRead: PathEntry[];
  allowWrite: PathEntry[];
  denyWrite: PathEntry[];
}

export const BUILTIN_POLICY: Policy = {
  source: "built-in",
  allowedDomains: [],
  deniedDomains: [],
  strictAllowlist: false,
  denyRead: [],
  allowRead: [],
  allowWrite: [],
  denyWrite: [],
};

const fail = (message: string) => new ReplError("CONFIG_INVALID", `Sandbox policy: ${message}`);

/**
 * Reads and checks a policy file. Relative paths in it are the file's own directory's (the runtime's CLI
 * takes them from its working directory; a file read by a server of another project must not change
 * meaning), and `~` is the home directory.
 */
export function loadPolicy(path: string): Policy {
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.length > SANDBOX_POLICY_MAX_BYTES)
      throw fail(`${path} exceeds ${SANDBOX_POLICY_MAX_BYTES} bytes`);
    text = bytes.toString("utf8");
  } catch (error) {
    if (error instanceof ReplError) throw error;
    throw fail(`${path} cannot be read (${describe(error)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw fail(`${path} is not valid JSON`);
  }
  const parsed = v.safeParse(PolicyFile, json);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const field = issue.path?.map((item) => String(item.key)).join(".");
    if (issue.type === "strict_object" && field) {
      throw fail(
        `${path}: unknown field "${field}" (repl-mcp honours network.allowedDomains, deniedDomains, strictAllowlist and filesystem.denyRead, allowRead, allowWrite, denyWrite)`,
      );
    }
    throw fail(`${path}: bad value for "${field ?? "the file"}" (${issue.message})`);
  }
  const { network = {}, filesystem = {} } = parsed.output;
  // The runtime's own checks of each entry (domain patterns, deny globs), so it never refuses later.
  const refusal = checkRuntimeSettings({ network, filesystem });
  if (refusal) throw fail(`${path}: ${refusal}`);
  const base = dirname(resolve(path));
  const absolute = (entries: PathEntry[] = []) => entries.map((entry) => absoluteEntry(entry, base));
  return {
    source: resolve(path),
    allowedDomains: network.allowedDomains ?? [],
    deniedDomains: network.deniedDomains ?? [],
    strictAllowlist: network.strictAllowlist ?? false,
    denyRead: absolute(filesystem.denyRead),
    allowRead: absolute(filesystem.allowRead),
    allowWrite: absolute(filesystem.allowWrite),
    denyWrite: absolute(filesystem.denyWrite),
  };
}

function absoluteEntry(entry: PathEntry, base: string): PathEntry {
  const make = (path: string) => {
    if (path === "~" || path.startsWith("~/")) return `${process.env.HOME || homedir()}${path.slice(1)}`;
    return isAbsolute(path) ? path : resolve(base, path);
  };
  return typeof entry === "string" ? make(entry) : { path: make(entry.path), literal: true };
}

/** The path an entry names (a pattern's text for a pattern). */
export function entryPath(entry: PathEntry): string {
  return typeof entry === "string" ? entry : entry.path;
}
