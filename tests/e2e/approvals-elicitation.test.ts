// Approvals and input() answered through MCP elicitation by an SDK client that declares forms, in both
// eras (2025-11-25 elicitation/create during the call; 2026-07-28 input_required results and retries):
// allow once, allow for the session, deny, decline, no answer in time, cancel while waiting, two calls
// waiting at once, a python_start run asked on its next poll, artifact_forward, and input()/getpass().
// The peer's own call log says what was really sent.
import { afterAll, afterEach, beforeEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import { type Era, Harness, type ToolResult, waitFor } from "../support/harness.ts";
import { PeerCalls } from "../support/peer-calls.ts";

interface Asked {
  message: string;
  schema: { properties: Record<string, { enum?: string[] }>; required: string[] };
  aborted: boolean;
}
type Answer = { action: "accept"; content: Record<string, unknown> } | { action: "decline" | "cancel" };
/** How the fake person answers one elicitation; a promise that never settles is a person who does not. */
type Person = (asked: Asked) => Answer | Promise<Answer>;

/** What a test drives: a server's default session, or a session of its own on the era's shared server. */
interface Seat {
  readonly project: string;
  readonly client: Client;
  run(code: string, args?: Record<string, unknown>): Promise<Record<string, any>>;
  call(name: string, args?: Record<string, unknown>): Promise<ToolResult>;
  sessionId(): Promise<string>;
}

/** The person of the test now running, and the forms it was shown (a shared server's client asks it). */
interface Asking {
  person: Person;
  asked: Asked[];
}

function answerForms(client: Client, asking: () => Asking) {
  client.setRequestHandler("elicitation/create", async (request, ctx) => {
    // Taken when the form arrives: a form a finished test left open still goes to that test's person.
    const { person, asked } = asking();
    const params = request.params as { message: string; requestedSchema: Asked["schema"] };
    const one: Asked = { message: params.message, schema: params.requestedSchema, aborted: false };
    ctx.mcpReq.signal.addEventListener("abort", () => {
      one.aborted = true;
    });
    asked.push(one);
    return (await person(one)) as never;
  });
}

async function startServer(calls: PeerCalls, options: StartOptions, asking: () => Asking) {
  return await Harness.start({
    era,
    args: options.args,
    capabilities: options.forms === false ? {} : { elicitation: { form: {} } },
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { typed: calls.entry({ approve: options.approve ?? "writes" }) } }),
      ),
    beforeConnect: (client: Client) => {
      if (options.forms !== false) answerForms(client, asking);
    },
  });
}

let era: Era = "legacy";

// A test that needs no options of its own gets a new session on one server per era, kept for the file:
// what it checks (the forms, the journal, the peer's calls, what the session allows) is the session's, and
// a server and its peer cost as much CPU to start as the test itself. The journal and the peer's log are
// read from where the test's session began.
interface Shared {
  harness: Harness;
  calls: PeerCalls;
  asking: Asking;
}
const shared = new Map<Era, Promise<Shared>>();
afterAll(async () => {
  for (const server of shared.values()) {
    const { harness, calls } = await server;
    await harness.close();
    calls.remove();
  }
});

function sharedServer(): Promise<Shared> {
  let server = shared.get(era);
  if (!server) {
    const calls = new PeerCalls();
    const asking: Asking = { person: never, asked: [] };
    server = startServer(calls, {}, () => asking).then((harness) => ({ harness, calls, asking }));
    shared.set(era, server);
  }
  return server;
}

let own: Harness | undefined;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  await own?.close();
  own = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

interface StartOptions {
  args?: string[];
  approve?: unknown;
  forms?: boolean;
  /** On the shared server, its default session (the one a 2025-11-25 client uses without naming it). */
  defaultSession?: boolean;
}

async function start(person: Person, options: StartOptions = {}) {
  const asked: Asked[] = [];
  if (options.args || options.approve !== undefined || options.forms === false) {
    const calls = new PeerCalls();
    cleanups.push(() => calls.remove());
    own = await startServer(calls, options, () => ({ person, asked }));
    return { harness: own as Seat, received: () => calls.tools(), asked };
  }
  const { harness, calls, asking } = await sharedServer();
  asking.person = person;
  asking.asked = asked;
  const before = calls.tools().length;
  if (options.defaultSession)
    return { harness: harness as Seat, received: () => calls.tools().slice(before), asked };
  const opened = await harness.call("python_session_open", { name: "test", project: harness.project });
  const id = opened.structuredContent.session_id as string;
  cleanups.push(() => harness.call("python_session_close", { session_id: id }));
  const seat: Seat = {
    project: harness.project,
    client: harness.client,
    run: async (code, args = {}) =>
      (await harness.call("execute_python", { session_id: id, code, ...args })).structuredContent,
    call: (name, args) => harness.call(name, args),
    sessionId: async () => id,
  };
  return { harness: seat, received: () => calls.tools().slice(before), asked };
}

/** Runs a cell and returns its value, failing the test with the cell's error and stderr if it failed. */
async function value(seat: Seat, code: string) {
  const result = await seat.run(code);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

const accept = (decision: string): Answer => ({ action: "accept", content: { decision } });
const never = () => new Promise<Answer>(() => {});

/** [exception type, code] of a call, or ["ok"]. */
const outcome = (call: string) =>
  [
    "try:",
    `    ${call}`,
    "    out = ['ok']",
    "except Exception as e:",
    "    out = [type(e).__name__, getattr(e, 'code', None)]",
    "out",
  ].join("\n");

/** Polls (without waiting for the answers: the one that carries a question returns once it is settled). */
async function pollUntilAsked(harness: Seat, sid: string, runId: string, asked: () => boolean) {
  const polls: Promise<unknown>[] = [];
  await waitFor(
    () => {
      if (asked()) return true;
      polls.push(harness.call("python_run", { session_id: sid, run_id: runId }));
      return false;
    },
    { timeoutMs: 20_000, intervalMs: 100, what: "a poll to carry the question" },
  );
  return polls;
}

/** The journal records of the seat's session (a shared server's journal holds the other tests' too). */
const journal = async (seat: Seat) =>
  value(
    seat,
    "[(r['tool'], r['status'], (r.get('approval') or {}).get('decision'), (r.get('approval') or {}).get('channel')) " +
      `for r in mcp.journal() if r['session_id'] == ${JSON.stringify(await seat.sessionId())}]`,
  );

for (const which of ["legacy", "modern"] as const) {
  describe(`approvals through elicitation (${which === "legacy" ? "2025-11-25 elicitation/create" : "2026-07-28 input_required"})`, () => {
    beforeEach(() => {
      era = which;
    });

    test("allow once: the form names the call and its arguments; each call is asked; the journal says who allowed", async () => {
      // The one test in the shared server's default session: no other test uses it.
      const { harness, received, asked } = await start(() => accept("allow_once"), { defaultSession: true });
      expect(await value(harness, outcome("mcp.typed.create_issue(title='first')"))).toEqual(["ok"]);
      expect(await value(harness, outcome("mcp.typed.create_issue(title='second')"))).toEqual(["ok"]);
      expect(received()).toEqual(["create_issue", "create_issue"]);
      expect(asked).toHaveLength(2);
      expect(asked[0]?.message).toContain("typed.create_issue");
      expect(asked[0]?.message).toContain('"title":"first"');
      expect(asked[0]?.schema.required).toEqual(["decision"]);
      expect(asked[0]?.schema.properties.decision?.enum).toEqual(["allow_once", "allow_session", "deny"]);
      // Read-only tools are not asked about.
      expect(await value(harness, outcome("mcp.typed.search(query='q')"))).toEqual(["ok"]);
      expect(asked).toHaveLength(2);
      expect(await journal(harness)).toEqual([
        ["create_issue", "completed", "allow_once", "elicitation"],
        ["create_issue", "completed", "allow_once", "elicitation"],
        ["search", "completed", null, null],
      ]);
    }, 60_000);

    test("allow for the session: later calls of that tool are not asked; other tools still are", async () => {
      const { harness, received, asked } = await start(() => accept("allow_session"));
      for (let i = 0; i < 3; i++)
        expect(await value(harness, outcome(`mcp.typed.create_issue(title='t${i}')`))).toEqual(["ok"]);
      expect(asked).toHaveLength(1);
      expect(await value(harness, outcome("mcp.typed.delete_everything(confirm=True)"))).toEqual(["ok"]);
      expect(asked).toHaveLength(2);
      expect(received()).toEqual(["create_issue", "create_issue", "create_issue", "delete_everything"]);
      const decisions = ((await journal(harness)) as string[][]).map((record) => record.slice(2));
      expect(decisions).toEqual([
        ["allow_session", "elicitation"],
        ["allow_session", "session"],
        ["allow_session", "session"],
        ["allow_session", "elicitation"],
      ]);
      // A new session starts with nothing allowed.
      const other = await harness.call("python_session_open", { name: "second", project: harness.project });
      const sid = (other.structuredContent as { session_id: string }).session_id;
      const result = await harness.call("execute_python", {
        session_id: sid,
        code: outcome("mcp.typed.create_issue(title='again')"),
      });
      expect((result.structuredContent as { value: unknown }).value).toEqual(["ok"]);
      expect(asked).toHaveLength(3);
    }, 60_000);

    test("deny and decline: APPROVAL_DENIED in the cell, nothing sent, journalled as denied", async () => {
      let answer: Answer = accept("deny");
      const { harness, received } = await start(() => answer);
      expect(await value(harness, outcome("mcp.typed.create_issue(title='t')"))).toEqual([
        "McpToolError",
        "APPROVAL_DENIED",
      ]);
      answer = { action: "decline" };
      expect(
        await value(harness, outcome("mcp.call('typed', 'create_issue', arguments={'title': 't'})")),
      ).toEqual(["McpToolError", "APPROVAL_DENIED"]);
      answer = { action: "cancel" };
      expect(
        await value(harness, outcome("await mcp.acall('typed', 'create_issue', arguments={'title': 't'})")),
      ).toEqual(["McpToolError", "APPROVAL_DENIED"]);
      expect(received()).toEqual([]);
      expect(await journal(harness)).toEqual([
        ["create_issue", "denied", "deny", "elicitation"],
        ["create_issue", "denied", "deny", "elicitation"],
        ["create_issue", "denied", "deny", "elicitation"],
      ]);
    }, 60_000);

    test("no answer in time: APPROVAL_REQUIRED, the form is withdrawn (a late answer changes nothing), nothing sent", async () => {
      // Under 2026-07-28 nothing can be withdrawn from the client: its late answer comes with the retry.
      const late = async () => {
        await Bun.sleep(2_500);
        return accept("allow_once");
      };
      const { harness, received, asked } = await start(which === "legacy" ? never : late, {
        args: ["--approval-timeout-s", "1"],
      });
      const started = performance.now();
      expect(await value(harness, outcome("mcp.typed.create_issue(title='t')"))).toEqual([
        "McpToolError",
        "APPROVAL_REQUIRED",
      ]);
      expect(performance.now() - started).toBeGreaterThan(900);
      expect(asked).toHaveLength(1);
      if (which === "legacy")
        await waitFor(() => asked[0]?.aborted === true, {
          timeoutMs: 5_000,
          what: "the form to be withdrawn",
        });
      expect(received()).toEqual([]);
      expect(await journal(harness)).toEqual([["create_issue", "not_approved", "timed_out", null]]);
    }, 60_000);

    test("a wait longer than the call's own timeout: the person's time does not count against it", async () => {
      const { harness, received } = await start(async () => {
        await Bun.sleep(3_000);
        return accept("allow_once");
      });
      // Connected and catalogued first (a read-only call is not asked about), so the 2 s cover only the call.
      expect(await value(harness, outcome("mcp.typed.search(query='warm')"))).toEqual(["ok"]);
      expect(
        await value(
          harness,
          outcome("mcp.call('typed', 'create_issue', arguments={'title': 't'}, timeout=2)"),
        ),
      ).toEqual(["ok"]);
      expect(received()).toEqual(["search", "create_issue"]);
    }, 60_000);

    test("while it waits, progress says so; the cell's own timeout ends the wait", async () => {
      const { harness, received } = await start(async () => {
        await Bun.sleep(2_000);
        return accept("allow_once");
      });
      const messages: string[] = [];
      const sid = await harness.sessionId();
      const result = (await harness.client.callTool(
        {
          name: "execute_python",
          arguments: { session_id: sid, code: outcome("mcp.typed.create_issue(title='p')") },
        },
        { timeout: 60_000, onprogress: (progress) => messages.push(progress.message ?? "") },
      )) as { structuredContent: { value: unknown } };
      expect(result.structuredContent.value).toEqual(["ok"]);
      // Under 2026-07-28 no request is in flight while the client asks its person: nothing to report on.
      if (which === "modern") return;
      expect(
        messages.some((message) =>
          message.includes("waiting for the person: approval of typed.create_issue"),
        ),
      ).toBe(true);
      const timedOut = await harness.run("mcp.typed.create_issue(title='late')", { timeout: 1 });
      expect(timedOut.error_code).toBe("TIMEOUT");
      expect(received()).toEqual(["create_issue"]);
    }, 60_000);

    test("two calls waiting at once (mcp.acall): each is asked and answered on its own", async () => {
      const { harness, received, asked } = await start((one) =>
        accept(one.message.includes('"title":"yes"') ? "allow_once" : "deny"),
      );
      const code = [
        "import asyncio",
        "async def one(title):",
        "    try:",
        "        await mcp.acall('typed', 'create_issue', arguments={'title': title})",
        "        return 'ok'",
        "    except mcp.McpToolError as e:",
        "        return e.code",
        "await asyncio.gather(one('yes'), one('no'))",
      ].join("\n");
      expect(await value(harness, code)).toEqual(["ok", "APPROVAL_DENIED"]);
      expect(asked).toHaveLength(2);
      expect(received()).toEqual(["create_issue"]);
    }, 60_000);

    test("python_start: a question waits for the next python_run poll, which carries it; other polls answer at once; cancel ends a wait", async () => {
      const waiting: ((a: Answer) => void)[] = [];
      const answerAll = (answer: Answer) => {
        for (const resolve of waiting.splice(0)) resolve(answer);
      };
      const { harness, received, asked } = await start(
        () =>
          new Promise<Answer>((resolve) => {
            waiting.push(resolve);
          }),
      );
      const sid = await harness.sessionId();
      const started = await harness.call("python_start", {
        session_id: sid,
        code: outcome("mcp.typed.create_issue(title='later')"),
      });
      const runId = (started.structuredContent as { run_id: string }).run_id;
      // Nobody is asked until a poll comes; the poll puts the form to the person and returns once it is answered.
      await Bun.sleep(300);
      expect(asked).toHaveLength(0);
      const polls = await pollUntilAsked(harness, sid, runId, () => asked.length > 0);
      // While one poll carries the question, another answers at once with what the run waits for, and
      // the person is not asked twice. The request's own timeout is how a hanging poll would show here.
      const another = (await harness.client.callTool(
        { name: "python_run", arguments: { session_id: sid, run_id: runId } },
        { timeout: 15_000 },
      )) as ToolResult;
      expect(another.structuredContent.waiting_for).toBe("approval of typed.create_issue");
      expect(asked).toHaveLength(1);
      answerAll(accept("allow_once"));
      await Promise.all(polls);
      await waitFor(
        async () =>
          (
            (await harness.call("python_run", { session_id: sid, run_id: runId })).structuredContent as {
              success?: boolean;
            }
          ).success === true,
        { timeoutMs: 20_000, what: "the run to finish" },
      );
      const done = (await harness.call("python_run", { session_id: sid, run_id: runId })).structuredContent;
      expect((done as { value: unknown }).value).toEqual(["ok"]);
      expect(received()).toEqual(["create_issue"]);

      // A second run waits; python_cancel ends the wait at once, and nothing is sent.
      const second = await harness.call("python_start", {
        session_id: sid,
        code: "mcp.typed.create_issue(title='never')",
      });
      const secondId = (second.structuredContent as { run_id: string }).run_id;
      const before = asked.length;
      const pollsWhileAsking = await pollUntilAsked(harness, sid, secondId, () => asked.length > before);
      await harness.call("python_cancel", { session_id: sid, run_id: secondId });
      if (which === "legacy")
        await waitFor(() => asked[before]?.aborted === true, {
          timeoutMs: 10_000,
          what: "the form to be withdrawn",
        });
      // Under 2026-07-28 the client's form stays open until the person answers; that answer is too late.
      answerAll(accept("allow_once"));
      await Promise.all(pollsWhileAsking);
      await waitFor(
        async () =>
          (
            (await harness.call("python_run", { session_id: sid, run_id: secondId })).structuredContent as {
              error_code?: string;
            }
          ).error_code === "CANCELLED",
        { timeoutMs: 20_000, what: "the cancelled result" },
      );
      expect(received()).toEqual(["create_issue"]);
    }, 90_000);

    test("artifact_forward as a tool is asked during its own call", async () => {
      const { harness, received, asked } = await start(() => accept("allow_once"));
      writeFileSync(join(harness.project, "body.txt"), "body");
      const sid = await harness.sessionId();
      const created = await harness.call("artifact_create", {
        session_id: sid,
        path: "body.txt",
        format: "text",
      });
      const forwarded = await harness.call("artifact_forward", {
        session_id: sid,
        id: (created.structuredContent as { id: string }).id,
        server: "typed",
        tool: "create_issue",
        argument: "body",
        format: "text",
        arguments: { title: "t" },
      });
      expect(forwarded.isError).not.toBe(true);
      expect(asked).toHaveLength(1);
      expect(received()).toEqual(["create_issue"]);
    }, 60_000);
  });

  describe(`input() and getpass() (${which})`, () => {
    beforeEach(() => {
      era = which;
    });

    test("input() is answered through elicitation; getpass() is never put to the client", async () => {
      const { harness, asked } = await start((one) =>
        one.schema.required.includes("value")
          ? { action: "accept", content: { value: "Ada" } }
          : accept("deny"),
      );
      const result = await harness.run("name = input('Your name? ')\nname.upper()");
      expect(result.value).toBe("ADA");
      expect(result.stdout).toBe("Your name? Ada\n");
      expect(asked[0]?.message).toBe("Your name?");
      const secret = await value(
        harness,
        "import getpass\ntry:\n    getpass.getpass()\n    r = 'answered'\nexcept EOFError as e:\n    r = str(e)\nr",
      );
      expect(secret).toContain("viewer");
      expect(asked).toHaveLength(1);
    }, 60_000);

    test("with nobody to ask, input() raises EOFError at once and says why; calls needing approval are refused", async () => {
      const { harness, received } = await start(never, { forms: false });
      const started = performance.now();
      const said = await value(
        harness,
        "try:\n    input('x')\n    r = 'answered'\nexcept EOFError as e:\n    r = str(e)\nr",
      );
      expect(performance.now() - started).toBeLessThan(20_000);
      expect(said).toContain("nobody can be asked");
      expect(await value(harness, outcome("mcp.typed.create_issue(title='t')"))).toEqual([
        "McpToolError",
        "APPROVAL_REQUIRED",
      ]);
      expect(received()).toEqual([]);
      expect(await journal(harness)).toEqual([["create_issue", "not_approved", "no_channel", null]]);
    }, 60_000);
  });
}
