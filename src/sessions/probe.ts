// Checks that an executable is a usable CPython before a session is published: run it in isolated mode
// in the project directory, through a guardian, with a deadline and a cap on what it may print.
import * as v from "valibot";
import { ReplError } from "../errors.ts";
import { GuardedProcess } from "../guardian/spawn.ts";
import { PROBE_OUTPUT_MAX_BYTES, PROBE_TIMEOUT_MS } from "../limits.ts";
import { withTimeout } from "../timeout.ts";

const PROBE =
  "import json, sys; print(json.dumps({'implementation': sys.implementation.name, " +
  "'version': '%d.%d.%d' % tuple(sys.version_info[:3]), 'major': sys.version_info[0], " +
  "'minor': sys.version_info[1], 'executable': sys.executable}))";

/** What the probe prints; anything else means the executable is not a CPython we can use. */
const ProbeOutput = v.object({
  implementation: v.literal("cpython"),
  version: v.string(),
  major: v.number(),
  minor: v.number(),
  executable: v.string(),
});
export type ProbeResult = v.InferOutput<typeof ProbeOutput>;

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
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ReplError("CANCELLED", "Session opening cancelled before publication"));
  });
  signal?.addEventListener("abort", onAbort, { once: true });
  const finished = (async () => {
    const output = await readBounded(child.stdout);
    await child.exited;
    return output;
  })();
  try {
    const output = await withTimeout(Promise.race([finished, aborted]), PROBE_TIMEOUT_MS, () => {
      throw new ReplError("PROBE_FAILED", "Interpreter probe timed out");
    });
    return parseProbe(output);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    // Whatever happened, the probe and anything it started are gone before we answer.
    await child.stop(0);
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
  let json: unknown;
  try {
    json = JSON.parse(output.trim());
  } catch {
    json = undefined;
  }
  const parsed = v.safeParse(ProbeOutput, json);
  if (!parsed.success) {
    throw new ReplError("PYTHON_UNSUPPORTED", "Requested executable is not a supported Python interpreter");
  }
  const probe = parsed.output;
  if (probe.major !== 3 || probe.minor < 10) {
    throw new ReplError("PYTHON_UNSUPPORTED", `Python 3.10 or newer is required (found ${probe.version})`);
  }
  return probe;
}
