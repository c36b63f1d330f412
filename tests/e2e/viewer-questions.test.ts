// The person answers on the viewer page, in a real headless Chromium, while an agent without elicitation
// drives the server: an approval card with the call's details and Allow once / Allow for the session /
// Deny, input() and getpass() text boxes, a request without the token refused, and python_run saying what
// a run waits for. With the page closed, nobody can be asked and the call is refused at once; a page
// opened while the client's form waits shows the question, and its answer withdraws the form.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { Harness, waitFor } from "../support/harness.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";
import { Browser, browserMissing, type ViewerAddress, viewerOf } from "../support/viewer.ts";

const noBrowser = browserMissing();
if (noBrowser) console.warn(`skipping the viewer's question tests: ${noBrowser}`);

let browser: Browser;
let harness: Harness | undefined;
let pages: Page[] = [];
const cleanups: (() => unknown)[] = [];
beforeAll(async () => {
  if (!noBrowser) browser = await Browser.launch();
});
afterAll(async () => {
  if (shared) {
    const { h, calls } = await shared;
    await h.close();
    calls.remove();
  }
  await browser?.close();
});
afterEach(async () => {
  await Promise.all(pages.map((page) => page.close().catch(() => undefined)));
  pages = [];
  await harness?.close();
  harness = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** What a test runs cells through: a server's default session, or a session of its own. */
type Seat = Pick<Harness, "run" | "callInSession">;

/** Runs a cell and returns its value, failing the test with the cell's error and stderr if it failed. */
async function value(seat: Seat, code: string) {
  const result = await seat.run(code);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return result.value;
}

async function startViewer(calls: PeerCalls, options: Partial<Parameters<typeof Harness.start>[0]> = {}) {
  return await Harness.start({
    ...options,
    args: ["--viewer"],
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { typed: calls.entry({ approve: ["create_*"] }) } }),
      ),
  });
}

async function openPage(viewer: ViewerAddress): Promise<Page> {
  const page = await browser.context.newPage();
  await page.goto(viewer.url);
  await page.locator("#connection.live").waitFor();
  return page;
}

/** A server of its own with a page on its viewer, for a test whose client is unlike the others'. */
async function watched(options: Partial<Parameters<typeof Harness.start>[0]> = {}) {
  const calls = new PeerCalls();
  cleanups.push(() => calls.remove());
  const h = await startViewer(calls, options);
  harness = h;
  const viewer = await viewerOf(h);
  const page = await openPage(viewer);
  pages.push(page);
  return { h, viewer, page, received: () => calls.tools() };
}

// The other tests share one server and one page on its viewer, each in a session of its own (the viewer
// asks in every session): what they check is the session's (what it allows, its journal records) and the
// page's questions, and a server, its peer and a page cost more CPU to start than such a test. The peer's
// log is read from where the test began; a test that closes the page gets the next test a new one.
let shared: Promise<{ h: Harness; viewer: ViewerAddress; calls: PeerCalls; page?: Page }> | undefined;

async function seated() {
  shared ??= (async () => {
    const calls = new PeerCalls();
    const h = await startViewer(calls);
    return { h, calls, viewer: await viewerOf(h) };
  })();
  const server = await shared;
  if (!server.page || server.page.isClosed()) server.page = await openPage(server.viewer);
  const page = server.page;
  // A question the previous test answered may still be leaving the page.
  await waitFor(async () => (await page.locator(".question").count()) === 0, {
    what: "the previous test's questions to leave the page",
  });
  const { h, calls, viewer } = server;
  const opened = await h.call("python_session_open", { name: "test", project: h.project });
  const session_id = opened.structuredContent.session_id as string;
  cleanups.push(() => h.call("python_session_close", { session_id }));
  const seat: Seat & { sessionId: string } = {
    sessionId: session_id,
    run: async (code, args = {}) =>
      (await h.call("execute_python", { session_id, code, ...args })).structuredContent,
    callInSession: (name, args = {}) => h.call(name, { session_id, ...args }),
  };
  const before = calls.tools().length;
  return { h: seat, viewer, page, received: () => calls.tools().slice(before) };
}

const CALL = createIssueCell("from the page");

describe.skipIf(noBrowser !== undefined)("questions on the viewer page", () => {
  test("the approval card shows the call; Allow once sends it once, Deny raises in the cell", async () => {
    const { h, page, received } = await seated();
    const running = h.run(CALL);
    const card = page.locator(".question.approval");
    await card.waitFor();
    expect(await card.locator("h2").textContent()).toBe("Allow typed.create_issue?");
    expect(await card.locator("pre.arguments").textContent()).toContain('"title":"from the page"');
    // python_run (another request of the same client) says what the run waits for.
    const live = (await h.callInSession("python_run", {})).structuredContent as { waiting_for?: string };
    expect(live.waiting_for).toBe("approval of typed.create_issue");
    await card.getByRole("button", { name: "Allow once" }).click();
    expect((await running).value).toBe("sent");
    await card.waitFor({ state: "detached" });
    expect(received()).toEqual(["create_issue"]);

    const denied = h.run(CALL);
    await page.locator(".question.approval").getByRole("button", { name: "Deny" }).click();
    expect((await denied).value).toBe("APPROVAL_DENIED");
    expect(received()).toEqual(["create_issue"]);
    expect(
      await value(
        h,
        "[(r['status'], r['approval']['decision'], r['approval']['channel']) for r in mcp.journal() " +
          `if r['session_id'] == ${JSON.stringify(h.sessionId)}]`,
      ),
    ).toEqual([
      ["completed", "allow_once", "viewer"],
      ["denied", "deny", "viewer"],
    ]);
  }, 90_000);

  test("Allow for the session: the next call goes without a card", async () => {
    const { h, page, received } = await seated();
    const first = h.run(CALL);
    const card = page.locator(".question.approval");
    await card.getByRole("button", { name: "Allow for the session" }).click();
    expect((await first).value).toBe("sent");
    // Gone before the next call, so the count below is of what that call put on the page.
    await card.waitFor({ state: "detached" });
    expect(await value(h, CALL)).toBe("sent");
    expect(received()).toEqual(["create_issue", "create_issue"]);
    expect(await page.locator(".question").count()).toBe(0);
  }, 90_000);

  test("a request without the token cannot answer; the card stays until the person does", async () => {
    const { h, viewer, page, received } = await seated();
    const running = h.run(CALL);
    const card = page.locator(".question.approval");
    await card.waitFor();
    const id = ((await card.getAttribute("id")) as string).replace("question-", "");
    const forged = await fetch(`${viewer.origin}/answer`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: viewer.origin },
      body: JSON.stringify({ id, decision: "allow_once" }),
    });
    expect(forged.status).toBe(401);
    // With the token, an answer to a question that does not exist is refused without effect.
    const unknown = await fetch(`${viewer.origin}/answer`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: viewer.origin, cookie: viewer.cookie },
      body: JSON.stringify({ id: "no-such-question", decision: "allow_once" }),
    });
    expect(unknown.status).toBe(409);
    expect(received()).toEqual([]);
    await card.getByRole("button", { name: "Deny" }).click();
    expect((await running).value).toBe("APPROVAL_DENIED");
  }, 90_000);

  test("input() gets a text box and getpass() a password box; answers come back to the cell", async () => {
    const { h, page } = await seated();
    const asking = h.run(
      "a = input('Your name? ')\nimport getpass\nb = getpass.getpass('Token: ')\n[a, len(b)]",
    );
    const box = page.locator(".question.input input.answer");
    await box.waitFor();
    expect(await box.getAttribute("type")).toBe("text");
    await box.fill("Ada");
    await page.locator(".question.input").getByRole("button", { name: "Send" }).click();
    const secret = page.locator('.question.input input[type="password"]');
    await secret.waitFor();
    await secret.fill("s3cret-value");
    await page.locator(".question.input").getByRole("button", { name: "Send" }).click();
    const result = await asking;
    expect(result.value).toEqual(["Ada", 12]);
    // The secret is in no output: the prompt is, the answer is not.
    expect(result.stdout).toBe("Your name? Ada\n");
    expect(JSON.stringify(result)).not.toContain("s3cret-value");
  }, 90_000);

  test("cancel while input() waits: the run stops at once and the card goes away", async () => {
    const { h, page } = await seated();
    const started = await h.callInSession("python_start", { code: "name = input('Name? ')" });
    const runId = (started.structuredContent as { run_id: string }).run_id;
    await page.locator(".question.input").waitFor();
    const live = (await h.callInSession("python_run", { run_id: runId })).structuredContent as {
      waiting_for?: string;
    };
    expect(live.waiting_for).toBe("an answer to input()");
    const asked = performance.now();
    await h.callInSession("python_cancel", { run_id: runId });
    await page.locator(".question.input").waitFor({ state: "detached" });
    await waitFor(
      async () =>
        (
          (await h.callInSession("python_run", { run_id: runId })).structuredContent as {
            error_code?: string;
          }
        ).error_code === "CANCELLED",
      { timeoutMs: 10_000, what: "the cancelled result" },
    );
    // Well inside the approval timeout (300 s): the wait ended with the run.
    expect(performance.now() - asked).toBeLessThan(30_000);
    expect(await value(h, "'name' in globals()")).toBe(false);
  }, 90_000);

  test("both channels: the page's answer wins and the client's form is withdrawn", async () => {
    const withdrawn: boolean[] = [];
    const { h, page, received } = await watched({
      capabilities: { elicitation: { form: {} } },
      beforeConnect: (client) =>
        client.setRequestHandler("elicitation/create", (_request, ctx) => {
          const index = withdrawn.push(false) - 1;
          return new Promise((_resolve, reject) => {
            ctx.mcpReq.signal.addEventListener("abort", () => {
              withdrawn[index] = true;
              reject(new Error("withdrawn"));
            });
          });
        }),
    });
    const running = h.run(CALL);
    await page.locator(".question.approval").getByRole("button", { name: "Allow once" }).click();
    expect((await running).value).toBe("sent");
    await waitFor(() => withdrawn[0] === true, {
      timeoutMs: 10_000,
      what: "the client's form to be withdrawn",
    });
    expect(withdrawn).toEqual([true]);
    expect(received()).toEqual(["create_issue"]);
  }, 90_000);

  test("a page opened while the client's form waits shows the question; its answer wins", async () => {
    const forms: { withdrawn: boolean }[] = [];
    const calls = new PeerCalls();
    cleanups.push(() => calls.remove());
    const h = await startViewer(calls, {
      capabilities: { elicitation: { form: {} } },
      beforeConnect: (client) =>
        client.setRequestHandler("elicitation/create", (_request, ctx) => {
          const form = { withdrawn: false };
          forms.push(form);
          return new Promise((_resolve, reject) => {
            ctx.mcpReq.signal.addEventListener("abort", () => {
              form.withdrawn = true;
              reject(new Error("withdrawn"));
            });
          });
        }),
    });
    harness = h;
    const viewer = await viewerOf(h);
    // No page is open yet: the question waits on the client's form alone.
    const running = h.run(CALL);
    await waitFor(() => forms.length === 1, { timeoutMs: 15_000, what: "the client's form" });
    const page = await openPage(viewer);
    pages.push(page);
    await page.locator(".question.approval").getByRole("button", { name: "Allow once" }).click();
    expect((await running).value).toBe("sent");
    await waitFor(() => forms[0]?.withdrawn === true, {
      timeoutMs: 10_000,
      what: "the client's form to be withdrawn",
    });
    expect(forms).toEqual([{ withdrawn: true }]);
    expect(calls.tools()).toEqual(["create_issue"]);
  }, 90_000);

  test("with the page closed nobody can be asked: the call is refused at once", async () => {
    const { h, page, received } = await seated();
    await page.close();
    await waitFor(async () => (await value(h, CALL)) === "APPROVAL_REQUIRED", {
      timeoutMs: 15_000,
      what: "the closed page to stop counting",
    });
    expect(received()).toEqual([]);
  }, 90_000);
});
