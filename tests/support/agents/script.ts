// The scripted session a fake model plays through every real agent client (Claude Code, Codex, Gemini):
// one list of steps, so each client's test reads the same moments and the assertions can be shared. A
// step's arguments may depend on what the model saw earlier (the session id from python_health, the run
// id from python_start), exactly as a real model would copy them from the text in front of it.

/** What a client put in front of its model for one tool call, as the fake model API received it. */
export interface Seen {
  /** Every piece of text the model got for this call, joined with "\n" in the client's order. */
  text: string;
  /** The pictures it got, as the client sent them (decoded size in bytes). */
  images: { mimeType: string; bytes: number }[];
  /**
   * The client's own error flag for the call where its API has one (Anthropic `is_error`); undefined where
   * the API has no such flag (the text then has to say so).
   */
  error: boolean | undefined;
  /** The raw item the client sent (for a failed comparison to show). */
  raw: unknown;
}

export type SeenSoFar = ReadonlyMap<string, Seen>;

export interface Step {
  /** Unique within the script; the key of the step's Seen. */
  name: string;
  /** The tool's MCP name (the client adds its own prefix: mcp__repl__…, mcp_repl_…). */
  tool: string;
  args(seen: SeenSoFar): Record<string, unknown>;
  /** The fake model waits this long before asking for the step (lets a started run make progress). */
  delayMs?: number;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/** The first UUID after `label` in a step's text (how the fake model reads an id off the page). */
export function idAfter(seen: SeenSoFar, step: string, label: RegExp): string {
  const text = seen.get(step)?.text ?? "";
  const at = text.search(label);
  const id = at < 0 ? undefined : text.slice(at).match(UUID)?.[0];
  if (!id) throw new Error(`the model found no id after ${label} in what it saw for ${step}:\n${text}`);
  return id;
}

/**
 * The session a cell names: the id python_health showed next to the word "session", if it showed one (a
 * model passes it where the text asks for it; where none is shown, the default session is meant).
 */
const sessionOf = (seen: SeenSoFar): string | undefined => {
  const text = seen.get("health")?.text ?? "";
  const at = text.search(/session/i);
  return at < 0 ? undefined : text.slice(at).match(UUID)?.[0];
};
export const inSession =
  (code: string, extra: Record<string, unknown> = {}) =>
  (seen: SeenSoFar) => ({
    code,
    ...withSession(seen),
    ...extra,
  });

const withSession = (seen: SeenSoFar) => {
  const id = sessionOf(seen);
  return id === undefined ? {} : { session_id: id };
};

export const PLOT = [
  "import matplotlib",
  "matplotlib.use('Agg')",
  "import matplotlib.pyplot as plt",
  "plt.figure(figsize=(3, 2), dpi=60)",
  "plt.plot([1, 4, 9, 16])",
  "plt.show()",
].join("\n");

export const SCRIPT: Step[] = [
  { name: "health", tool: "python_health", args: () => ({}) },
  { name: "value", tool: "execute_python", args: inSession("x = 21*2; x") },
  {
    name: "prints",
    tool: "execute_python",
    args: inSession("for i in range(3):\n    print(f'line {i}')\n{'a': 1, 'b': [1, 2]}"),
  },
  { name: "zero", tool: "execute_python", args: inSession("1/0") },
  {
    name: "printed-then-raised",
    tool: "execute_python",
    args: inSession("print('before the failure')\nraise ValueError('bad input 7')"),
  },
  { name: "plot", tool: "execute_python", args: inSession(PLOT) },
  { name: "slow", tool: "execute_python", args: inSession("import time\ntime.sleep(6)\n'slept'") },
  {
    name: "start",
    tool: "python_start",
    args: inSession(
      "import time\nfor i in range(4):\n    print(f'tick {i}', flush=True)\n    time.sleep(1)\n'done'",
    ),
  },
  {
    name: "poll-running",
    tool: "python_run",
    delayMs: 1_500,
    args: (seen) => ({ ...withSession(seen), run_id: idAfter(seen, "start", /run/i) }),
  },
  {
    name: "poll-finished",
    tool: "python_run",
    delayMs: 4_500,
    args: (seen) => ({ ...withSession(seen), run_id: idAfter(seen, "start", /run/i) }),
  },
  {
    name: "dataframe",
    tool: "execute_python",
    args: inSession("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})"),
  },
  { name: "large", tool: "execute_python", args: inSession("list(range(50_000))") },
  { name: "no-session", tool: "execute_python", args: () => ({ code: "'anonymous'" }) },
];

/** The interpreter with matplotlib and pandas (CI installs Debian's packages into it). */
export const SYSTEM_PYTHON = "/usr/bin/python3";
