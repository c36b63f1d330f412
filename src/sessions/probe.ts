// Checks that an executable is a usable CPython before a session is published: run it in isolated mode
// in the project directory, through a guardian, with a deadline and a cap on what it may print.
import { ReplError } from "../errors.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import { PROBE_OUTPUT_MAX_BYTES, PROBE_TIMEOUT_MS } from "../limits.ts";

const PROBE =
  "import json, sys; print(json.dumps({'implementation': sys.implementation.name, " +
  "'version': '%d.%d.%d' % tuple(sys.version_info[:3]), 'major': sys.version_info[0], " +
  "'minor': sys.version_info[1], 'executable': sys.executable}))";

export interface ProbeResult {
  version: string;
  executable: string;
  major: number;
  minor: number;
}

export async function probeInterpreter(
  python: string,
  project: string,
  env: Record<string, string>,
  signal: AbortSignal | undefined,
): Promise<ProbeResult> {
  const child = new GuardedProcess(
    { program: python, args: ["-I", "-c", PROBE], env, cwd: project },
    { stderr: "ignore" },
  );
  child.stdin.end();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stop!: (error: ReplError) => void;
  const stopped = new Promise<never>((_, reject) => {
    stop = reject;
  });
  timer = setTimeout(
    () => stop(new ReplError("PROBE_FAILED", "Interpreter probe timed out")),
    PROBE_TIMEOUT_MS,
  );
  const onAbort = () => stop(new ReplError("CANCELLED", "Session opening cancelled before publication"));
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const output = await Promise.race([readBounded(child.stdout), stopped]);
    await Promise.race([child.exited, stopped]);
    return parseProbe(output);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    // Whatever happened, the probe and anything it started are gone before we answer.
    child.signal("SIGKILL");
    child.closeControl();
    await child.exited;
  }
}

async function readBounded(stream: ReadableStream<Uint8Array>): Promise<string> {
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of stream) {
    bytes += chunk.length;
    if (bytes > PROBE_OUTPUT_MAX_BYTES)
      throw new ReplError("PROBE_FAILED", "Interpreter probe output exceeded limit");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parseProbe(output: string): ProbeResult {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(output.trim());
  } catch {
    throw new ReplError("PYTHON_UNSUPPORTED", "Requested executable is not a supported Python interpreter");
  }
  const { implementation, version, major, minor, executable } = parsed;
  if (
    implementation !== "cpython" ||
    typeof version !== "string" ||
    typeof major !== "number" ||
    typeof minor !== "number" ||
    typeof executable !== "string"
  ) {
    throw new ReplError("PYTHON_UNSUPPORTED", "Requested executable is not a supported Python interpreter");
  }
  if (major !== 3 || minor < 10) {
    throw new ReplError("PYTHON_UNSUPPORTED", `Python 3.10 or newer is required (found ${version})`);
  }
  return { version, executable, major, minor };
}
