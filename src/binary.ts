// Facts about the running executable.

/** True in the compiled binary (its entry runs from Bun's virtual file system), false from a checkout. */
export function isCompiled(): boolean {
  return Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN");
}
