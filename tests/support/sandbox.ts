// What the contained-cell tests (--sandbox) need of this machine: Linux, bubblewrap, socat and ripgrep on
// PATH, and a bubblewrap that can make the namespaces (user namespaces allowed, or root with the
// capability). Tests that need it skip, saying why, elsewhere.

let missing: string | undefined | null = null;

/** Why --sandbox cannot contain here, or undefined. Probes once. */
export function sandboxMissing(): string | undefined {
  if (missing !== null) return missing;
  missing = probe();
  return missing;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return "the contained-cell tests run on Linux (bubblewrap)";
  const absent = ["bwrap", "socat", "rg"].filter((name) => !Bun.which(name));
  if (absent.length > 0)
    return `${absent.join(", ")} not on PATH (install Debian's bubblewrap, socat and ripgrep)`;
  const tried = Bun.spawnSync(["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--", "/bin/true"], {
    stderr: "pipe",
  });
  if (tried.exitCode !== 0)
    return `bubblewrap cannot make namespaces here: ${tried.stderr.toString().trim()}`;
  return undefined;
}
