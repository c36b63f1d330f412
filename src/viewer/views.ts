// What the page is told: plain JSON views of sessions and runs, built from the session, run and history
// layer when an event leaves (never kept). Pictures and artifacts are named by same-origin paths the
// viewer serves itself; their bytes never ride on the event stream.
import type { ArtifactReference } from "../artifacts/reference.ts";
import type { Asked } from "../person/questions.ts";
import type { Session } from "../sessions/session.ts";
import { cutUtf8 } from "../text/utf8.ts";
import type { EarlierRun } from "../worker/frames.ts";
import type { ExecutionResult } from "../worker/result.ts";
import type { ActiveRun } from "../worker/run.ts";

/** Pictures the page may show; anything else (SVG included, which can carry script) is a download. */
export const IMAGE_MIMES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export interface SessionView {
  session_id: string;
  name: string;
  project: string;
  interpreter: string;
  python_version: string | null;
  generation: number;
  state: Session["runtimeStatus"];
  active_run: string | null;
  /** Where a kernel session runs: `kernel <id> on "<server>"`; null for a local worker. */
  kernel: string | null;
}

export function sessionView(session: Session): SessionView {
  const ready = session.supervisor.python;
  return {
    session_id: session.id,
    name: session.name,
    project: session.project,
    interpreter: ready?.python_executable ?? session.python,
    python_version: ready?.python_version ?? null,
    generation: session.supervisor.generation,
    state: session.runtimeStatus,
    active_run: session.supervisor.active?.id ?? null,
    kernel: session.kernel ? `${session.kernel.label} (${session.kernel.kernelName})` : null,
  };
}

/** What the hub remembers of a run: its source and timing; the rest lives in the run or the history. */
export interface RunRecord {
  sessionId: string;
  runId: string;
  source: string;
  /** Wall-clock start, milliseconds since the epoch. */
  startedAt: number;
  /** Set while the run holds its session's slot. */
  active: ActiveRun | undefined;
  /** Artifacts of the session that appeared while the run held the slot. */
  made: Set<string>;
  /** Output characters sent to pages so far, and left out past the cap, per stream. */
  sent: { stdout: number; stderr: number };
  omitted: { stdout: number; stderr: number };
  /** Output waiting for the next flush. */
  pending: { stdout: string; stderr: string };
}

/** "earlier": a run an earlier server started in a worker this one adopted (only its source and outputs are known). */
export type RunStatus = "running" | "finished" | "failed" | "cancelled" | "earlier";

export interface ArtifactLink {
  id: string;
  size: number;
  format: string;
  what: string;
  url: string;
}

export interface RunView {
  session_id: string;
  run_id: string;
  source: string;
  status: RunStatus;
  started_at: number;
  elapsed_ms: number;
  stdout: string;
  stderr: string;
  omitted: { stdout: number; stderr: number };
  return_value?: string | null;
  value_info?: ExecutionResult["value_info"];
  error?: string | null;
  error_code?: string | null;
  truncated?: ExecutionResult["truncated"];
  displays?: { mime: string; text?: string; image?: string; artifact?: ArtifactLink }[];
  artifacts?: ArtifactLink[];
}

export function sourceOf(task: ActiveRun["task"], maxBytes: number): string {
  if (task.kind === "file") {
    const args = task.argv.length ? ` ${task.argv.join(" ")}` : "";
    return `# python_run_file (${task.mode}): ${task.path}${args}`;
  }
  if (task.kind !== "cell") return "";
  const cut = cutUtf8(task.code, maxBytes);
  return cut.cut ? `${cut.text}\n# … the rest of the cell is not shown here` : cut.text;
}

export function liveRunView(record: RunRecord, run: ActiveRun): RunView {
  return {
    ...base(record),
    status: "running",
    elapsed_ms: run.elapsedMs(),
    stdout: run.live.stdout,
    stderr: run.live.stderr,
  };
}

/** `made`: the artifacts the cell itself created (still stored, none of another run's pictures). */
export function finishedRunView(
  record: RunRecord,
  result: ExecutionResult,
  made: ArtifactReference[],
): RunView {
  const link = (id: string, size: number, format: string, what: string): ArtifactLink => ({
    id,
    size,
    format,
    what,
    url: `/artifact/${record.sessionId}/${id}`,
  });
  const artifacts: ArtifactLink[] = [];
  const listed = new Set<string>();
  const add = (artifact: ArtifactLink) => {
    if (listed.has(artifact.id)) return;
    listed.add(artifact.id);
    artifacts.push(artifact);
  };
  if (result.artifact) {
    const a = result.artifact;
    add(link(a.id, a.size, a.format, "the whole value"));
  }
  const displays = (result.displays ?? []).map((display, index) => {
    const shown: NonNullable<RunView["displays"]>[number] = { mime: display.mime };
    if (display.text !== undefined && !display.mime.startsWith("image/")) shown.text = display.text;
    if (IMAGE_MIMES.has(display.mime) && (display.data !== undefined || display.artifact)) {
      shown.image = `/display/${record.sessionId}/${record.runId}/${index}`;
    }
    if (display.artifact) {
      const a = display.artifact;
      shown.artifact = link(a.id, a.size, a.format, `display ${index + 1} (${display.mime})`);
      add(shown.artifact);
    }
    return shown;
  });
  return {
    ...base(record),
    status: statusOf(result),
    elapsed_ms: result.elapsed_ms,
    stdout: result.stdout,
    stderr: result.stderr,
    return_value: result.return_value,
    ...(result.value_info ? { value_info: result.value_info } : {}),
    error: result.error,
    error_code: result.error_code,
    truncated: result.truncated,
    displays,
    artifacts: [
      ...artifacts,
      ...made.filter((a) => !listed.has(a.id)).map((a) => link(a.id, a.size, a.format, "made by the cell")),
    ],
  };
}

/** A run the worker of an adopted session retained from before the adoption. */
export function earlierRunView(sessionId: string, run: EarlierRun, adoptedAt: number): RunView {
  return {
    session_id: sessionId,
    run_id: run.run_id,
    source: run.source,
    status: "earlier",
    started_at: adoptedAt,
    elapsed_ms: 0,
    stdout: run.stdout ?? "",
    stderr: run.stderr ?? "",
    omitted: { stdout: 0, stderr: 0 },
    return_value: run.return_value ?? null,
    error: run.error ?? null,
  };
}

function base(record: RunRecord) {
  return {
    session_id: record.sessionId,
    run_id: record.runId,
    source: record.source,
    started_at: record.startedAt,
    omitted: { ...record.omitted },
  };
}

function statusOf(result: ExecutionResult): RunStatus {
  if (result.success) return "finished";
  return result.error_code === "CANCELLED" ? "cancelled" : "failed";
}

/** A question as the page shows it; a getpass() prompt asks for a password box. */
export function questionView(asked: Asked, session: Session | undefined) {
  const { question, where } = asked;
  return {
    id: asked.id,
    session_id: where.sessionId,
    session_name: session?.name ?? null,
    run_id: where.runId,
    asked_at: asked.askedAt,
    ...(question.kind === "approval"
      ? {
          kind: "approval" as const,
          server: question.server,
          tool: question.tool,
          summary: question.summary,
          arguments: question.arguments,
        }
      : question.kind === "network"
        ? { kind: "network" as const, host: question.host, port: question.port }
        : { kind: "input" as const, prompt: question.prompt, secret: question.secret }),
  };
}
