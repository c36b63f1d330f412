// Running a command to its end in a test: its output collected, a deadline after which it is killed
// and the call fails. Asynchronous, because a fixture (a fake server, a peer) may live in this process.
export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** "pipe" keeps stdin open (and unwritten) for the whole run, so a server cannot leave on its EOF. */
  stdin?: "ignore" | "pipe";
  /** Kill the process (group) and fail if it has not exited by then. */
  timeoutMs?: number;
  /** Start the command in its own process group (so a signal can reach the whole group). */
  detached?: boolean;
  /** Called right after spawning, e.g. to signal the process later. */
  onSpawn?: (proc: { pid: number }) => void;
}

export async function run(cmd: string[], options: RunOptions = {}): Promise<RunResult> {
  const proc = Bun.spawn(cmd, {
    cwd: options.cwd,
    env: options.env,
    stdin: options.stdin ?? "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: options.detached,
  });
  options.onSpawn?.(proc);
  const timeoutMs = options.timeoutMs ?? 120_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      if (options.detached) process.kill(-proc.pid, "SIGKILL");
      else proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  }, timeoutMs);
  try {
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    if (timedOut) throw new Error(`${cmd.join(" ")} did not finish within ${timeoutMs} ms`);
    return { code, signal: proc.signalCode === null ? null : String(proc.signalCode), stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}
