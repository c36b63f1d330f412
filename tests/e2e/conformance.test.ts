// The MCP conformance suite's server scenarios against the running binary over HTTP, once per requirement
// set and at that revision's wire: 2025-11-25 with the initialize handshake and sessions, 2026-07-28 stateless
// with the per-request _meta envelope. The suite needs Node 22 APIs, so its entry point runs on the pinned
// bun. Scenarios for features repl-mcp does not offer are listed with the reason, and the listing must stay
// complete for both sets so a newer suite cannot slip past. Single checks of an applicable scenario that
// cannot apply (they call the suite's own diagnostic tools, or need prompts) are named below with the
// reason; every other check must succeed (a SHOULD may warn, as in the suite's own verdict), and a named
// one that starts to pass fails the test so its entry is removed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDir } from "../support/harness.ts";
import { HttpServer } from "../support/http.ts";

const ROOT = resolve(import.meta.dir, "../..");
const ENTRY = join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");

type Revision = "2025-11-25" | "2026-07-28";

const FIXTURE_TOOL = "calls a tool of the suite's own reference server (test_simple_text, ...)";
const NEVER_ASKS = "repl-mcp never asks the client to sample or elicit";
const FIXTURE_RESOURCE = "reads the suite's fixture resources (test://static-text, ...); ours are artifacts";
const NO_PROMPTS = "no prompts";

/** Scenarios for tools, resources and capabilities repl-mcp does not have, in both revisions. */
const EITHER: Record<string, string> = {
  "completion-complete": "no completions capability",
  "tools-call-simple-text": FIXTURE_TOOL,
  "tools-call-image": FIXTURE_TOOL,
  "tools-call-audio": FIXTURE_TOOL,
  "tools-call-embedded-resource": FIXTURE_TOOL,
  "tools-call-mixed-content": FIXTURE_TOOL,
  "tools-call-error": FIXTURE_TOOL,
  "tools-call-with-progress": FIXTURE_TOOL,
  "json-schema-2020-12": FIXTURE_TOOL,
  "resources-read-text": FIXTURE_RESOURCE,
  "resources-read-binary": FIXTURE_RESOURCE,
  "resources-templates-read": FIXTURE_RESOURCE,
  "prompts-list": NO_PROMPTS,
  "prompts-get-simple": NO_PROMPTS,
  "prompts-get-with-args": NO_PROMPTS,
  "prompts-get-embedded-resource": NO_PROMPTS,
  "prompts-get-with-image": NO_PROMPTS,
};

const TASKS =
  "tasks extension (never scored); calls the suite's task fixture tools (greet, slow_compute, ...)";
const INPUT_REQUIRED = `calls the suite's input-required fixture tools; ${NEVER_ASKS}`;

const SETS: Record<Revision, { applicable: string[]; notApplicable: Record<string, string> }> = {
  "2025-11-25": {
    applicable: [
      "server-initialize",
      "ping",
      "tools-list",
      "resources-list",
      "server-sse-multiple-streams",
      "server-sse-polling",
      "server-session-lifecycle",
      "dns-rebinding-protection",
    ],
    notApplicable: {
      ...EITHER,
      "logging-set-level": "no logging capability",
      "tools-call-with-logging": FIXTURE_TOOL,
      "tools-call-sampling": `${FIXTURE_TOOL}; ${NEVER_ASKS}`,
      "tools-call-elicitation": `${FIXTURE_TOOL}; ${NEVER_ASKS}`,
      "elicitation-sep1034-defaults": `${FIXTURE_TOOL}; ${NEVER_ASKS}`,
      "elicitation-sep1330-enums": `${FIXTURE_TOOL}; ${NEVER_ASKS}`,
      "resources-subscribe": "no resource subscriptions",
      "resources-unsubscribe": "no resource subscriptions",
    },
  },
  "2026-07-28": {
    applicable: [
      "server-stateless",
      "tools-list",
      "caching",
      "server-sse-multiple-streams",
      "resources-list",
      "sep-2164-resource-not-found",
      "dns-rebinding-protection",
    ],
    notApplicable: {
      ...EITHER,
      "input-required-result-basic-elicitation": INPUT_REQUIRED,
      "input-required-result-basic-sampling": INPUT_REQUIRED,
      "input-required-result-basic-list-roots": INPUT_REQUIRED,
      "input-required-result-request-state": INPUT_REQUIRED,
      "input-required-result-multiple-input-requests": INPUT_REQUIRED,
      "input-required-result-multi-round": INPUT_REQUIRED,
      "input-required-result-missing-input-response": INPUT_REQUIRED,
      "input-required-result-non-tool-request": INPUT_REQUIRED,
      "input-required-result-result-type": INPUT_REQUIRED,
      "input-required-result-unsupported-methods": INPUT_REQUIRED,
      "input-required-result-tampered-state": INPUT_REQUIRED,
      "input-required-result-capability-check": INPUT_REQUIRED,
      "input-required-result-ignore-extra-params": INPUT_REQUIRED,
      "input-required-result-validate-input": INPUT_REQUIRED,
      "tasks-lifecycle": TASKS,
      "tasks-capability-negotiation": TASKS,
      "tasks-wire-fields": TASKS,
      "tasks-request-state-removal": TASKS,
      "tasks-mrtr-input": TASKS,
      "tasks-request-headers": TASKS,
      "tasks-dispatch-and-envelope": TASKS,
      "tasks-status-notifications": TASKS,
      "tasks-required-task-error": TASKS,
      "tasks-mrtr-composition": TASKS,
      "http-header-validation": "pending in the suite: needs its x-mcp-header fixture tools",
      "http-custom-header-server-validation": "pending in the suite: needs its x-mcp-header fixture tools",
    },
  },
};

const DIAGNOSTIC_TOOL = "calls a diagnostic tool only the suite's reference server has";

/** Checks of applicable scenarios that cannot apply, as `scenario:check-id`: they fail, by design. */
const NOT_APPLICABLE_CHECKS: Record<string, string> = {
  "server-stateless:sep-2575-server-rejects-undeclared-capability": `${DIAGNOSTIC_TOOL} (test_missing_capability)`,
  "server-stateless:sep-2575-missing-capability-http-400": `${DIAGNOSTIC_TOOL} (test_missing_capability)`,
  "server-stateless:sep-2575-http-server-no-independent-requests-on-stream": `${DIAGNOSTIC_TOOL} (test_streaming_elicitation)`,
  "server-stateless:sep-2575-server-no-log-without-loglevel": `${DIAGNOSTIC_TOOL} (test_logging_tool)`,
  "caching:sep-2549-prompts-list-caching-hints": NO_PROMPTS,
};

let server: HttpServer;
beforeAll(async () => {
  // The suite's runner has no way to send an Authorization header.
  server = await HttpServer.start(["--no-auth"]);
});
afterAll(async () => {
  await server.stop();
});

async function conformance(...args: string[]): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([process.execPath, ENTRY, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "1" },
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  // The suite colours its output even without a terminal.
  return { code, out: Bun.stripANSI(out + err) };
}

/** The server scenarios a requirement set names: required ones, and those it runs without scoring. */
async function serverScenarios(revision: Revision): Promise<string[]> {
  const { out } = await conformance("list", "--server", "--requirements", revision);
  const names: string[] = [];
  let section = "";
  for (const line of out.split("\n")) {
    if (/^\S/.test(line)) section = line;
    const entry = /^\s+- (\S+)(?: \[(server|client)\])?$/.exec(line);
    if (!entry) continue;
    const role = entry[2] ?? (section.startsWith("Server scenarios") ? "server" : "client");
    if (role === "server") names.push(entry[1] as string);
  }
  return names;
}

interface Check {
  id: string;
  status: "SUCCESS" | "FAILURE" | "WARNING" | "SKIPPED" | "INFO";
  errorMessage?: string;
}

/**
 * Every scenario of a requirement set, run by one process of the suite (`--requirements`: each at that
 * revision's wire) instead of one process per scenario: starting the suite costs more CPU than most of its
 * scenarios do. It saves each scenario's checks in a directory of its own, read by `checksOf`.
 */
const requirementRuns = new Map<Revision, { dir: string; out: Promise<string> }>();
function requirementRun(revision: Revision): { dir: string; out: Promise<string> } {
  let run = requirementRuns.get(revision);
  if (!run) {
    const dir = tempDir("repl-mcp-conformance-server-");
    const args = ["server", "--url", server.url, "--requirements", revision, "-o", dir];
    run = { dir, out: conformance(...args).then((result) => result.out) };
    requirementRuns.set(revision, run);
  }
  return run;
}
afterAll(async () => {
  for (const { dir, out } of requirementRuns.values()) {
    await out.catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The checks one scenario recorded in its revision's run, and what the suite printed while it ran. */
async function checksOf(scenario: string, revision: Revision): Promise<{ checks: Check[]; out: string }> {
  const run = requirementRun(revision);
  const all = await run.out;
  const start = all.indexOf(`=== Running scenario: ${scenario} ===`);
  const end = all.indexOf("=== Running scenario:", start + 1);
  const out = start === -1 ? all : all.slice(start, end === -1 ? undefined : end);
  // Named `server-<scenario>-<timestamp>`: the timestamp keeps tools-list from matching tools-list-x.
  const runs = readdirSync(run.dir).filter((name) =>
    new RegExp(`^server-${scenario}-\\d{4}-\\d\\d-\\d\\dT`).test(name),
  );
  if (runs.length !== 1) throw new Error(`expected one result directory, got ${runs.join(", ")}:\n${out}`);
  const checks = JSON.parse(readFileSync(join(run.dir, runs[0] as string, "checks.json"), "utf8")) as Check[];
  return { checks, out };
}

/**
 * The verdict in words a failed comparison shows as they are: the checks that failed and may not, and the
 * not-applicable checks that no longer fail.
 */
function verdict(scenario: string, checks: Check[]) {
  const excused = (check: Check) => `${scenario}:${check.id}` in NOT_APPLICABLE_CHECKS;
  return {
    failed: checks
      .filter((check) => check.status === "FAILURE" && !excused(check))
      .map((check) => `${check.id}: ${check.errorMessage ?? ""}`),
    excusedButPassing: checks
      .filter((check) => check.status === "SUCCESS" && excused(check))
      .map((check) => `${check.id} passes now: remove it from NOT_APPLICABLE_CHECKS`),
    // An excuse for a check the scenario no longer runs would hide nothing and mislead the next reader.
    excusedButGone: Object.keys(NOT_APPLICABLE_CHECKS)
      .filter((key) => key.startsWith(`${scenario}:`))
      .map((key) => key.slice(scenario.length + 1))
      .filter((id) => !checks.some((check) => check.id === id))
      .map((id) => `${id} is not run any more: remove it from NOT_APPLICABLE_CHECKS`),
  };
}

for (const revision of Object.keys(SETS) as Revision[]) {
  const { applicable, notApplicable } = SETS[revision];
  describe(`requirement set ${revision}`, () => {
    test("every server scenario it names is either run here or listed as not applicable", async () => {
      const listed = await serverScenarios(revision);
      expect(listed.length).toBeGreaterThan(20);
      expect(listed.sort()).toEqual([...applicable, ...Object.keys(notApplicable)].sort());
    });

    for (const scenario of applicable) {
      test(`conformance ${revision}: ${scenario}`, async () => {
        const { checks, out } = await checksOf(scenario, revision);
        // A scenario outside the revision's window would be skipped without checks: it must have run.
        expect(checks.length, out).toBeGreaterThan(0);
        expect(verdict(scenario, checks)).toEqual({ failed: [], excusedButPassing: [], excusedButGone: [] });
      });
    }
  });
}
