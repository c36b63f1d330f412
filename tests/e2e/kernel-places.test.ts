// Kernel sessions on the two other places an organisation runs Jupyter, end to end through the binary:
// a JupyterHub user server reached through the hub's proxy under /user/<name>/ with a hub API token (the
// path an organisation gives its users), and a Jupyter Server on a second host (a network namespace with
// its own address; nothing is shared over loopback). Each: values, streamed output, a picture, an mcp call
// through the local broker, cancel, and no kernel left after the session closes.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { JupyterHub, jupyterhubMissing } from "../support/jupyterhub.ts";
import { netnsMissing, SecondHost } from "../support/netns.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";

const noHub = jupyterhubMissing();
if (noHub) console.warn(`skipping the JupyterHub kernel session test: ${noHub}`);
const noSecondHost = jupyterMissing() ?? netnsMissing();
if (noSecondHost) console.warn(`skipping the second-host kernel session test: ${noSecondHost}`);

/** The binary, configured for one kernel server "place" at `url` with `token`, and the typed peer. */
async function serverFor(url: string, token: string, calls: PeerCalls): Promise<Harness> {
  let file = "";
  return await Harness.start({
    beforeStart: (project) => {
      file = join(project, "kernels.json");
      writeFileSync(file, JSON.stringify({ kernelServers: { place: { url, token: "${PLACE_TOKEN}" } } }));
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: { typed: calls.entry() } }));
    },
    get args() {
      return ["--kernels", file];
    },
    env: { PLACE_TOKEN: token },
  });
}

/** Everything a session does there; returns the kernel id it ran on. */
async function exercise(h: Harness, calls: PeerCalls): Promise<string> {
  const opened = await h.call("python_session_open", { name: "remote", kernel_server: "place" });
  expect(opened.isError).toBeFalsy();
  const session = opened.structuredContent.session_id;
  const run = async (code: string) =>
    (await h.call("execute_python", { session_id: session, code })).structuredContent;
  expect(await run("x = 6 * 7\nprint('hello from there')\nx")).toMatchObject({
    success: true,
    value: 42,
    stdout: "hello from there\n",
  });
  const picture = await h.call("execute_python", {
    session_id: session,
    code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
  });
  expect(picture.content.some((block) => block.type === "image")).toBe(true);
  expect(await run(createIssueCell("remote"))).toMatchObject({ success: true, value: "sent" });
  expect(calls.tools()).toEqual(["create_issue"]);
  const started = (
    await h.call("python_start", { session_id: session, code: "import time\ntime.sleep(600)" })
  ).structuredContent;
  await Bun.sleep(300);
  await h.call("python_cancel", { session_id: session, run_id: started.run_id });
  let ended: Record<string, unknown> = {};
  await waitFor(
    async () => {
      ended = (await h.call("python_run", { session_id: session, run_id: started.run_id })).structuredContent;
      return ended.status === undefined;
    },
    { timeoutMs: 20_000, what: "the cancelled run to end" },
  );
  expect(ended).toMatchObject({ error_code: "CANCELLED", state: "preserved" });
  expect(await run("x")).toMatchObject({ value: 42 });
  const kernelId = opened.structuredContent.environment.kernel.kernel_id;
  await h.call("python_session_close", { session_id: session });
  return kernelId;
}

describe.skipIf(noHub !== undefined)("a kernel session on a JupyterHub user server", () => {
  test("through the hub's proxy under /user/<name>/ with a hub API token", async () => {
    const hub = await JupyterHub.start();
    const calls = new PeerCalls();
    let h: Harness | undefined;
    try {
      h = await serverFor(hub.userUrl, hub.userToken, calls);
      const health = (await h.call("python_health")).structuredContent;
      expect(health.kernel_servers).toEqual([{ name: "place", url: hub.userUrl, kernel: null }]);
      const kernelId = await exercise(h, calls);
      const listed = await fetch(`${hub.userUrl}api/kernels`, {
        headers: { authorization: `token ${hub.userToken}` },
      });
      const ids = ((await listed.json()) as { id: string }[]).map((kernel) => kernel.id);
      expect(ids).not.toContain(kernelId);
      expect(ids).toEqual([]);
    } finally {
      await h?.close();
      calls.remove();
      await hub.stop();
    }
  }, 120_000);
});

describe.skipIf(noSecondHost !== undefined)("a kernel session on a second host", () => {
  test("a Jupyter Server in its own network namespace, reached over its own address", async () => {
    const host = await SecondHost.create();
    const calls = new PeerCalls();
    let jupyter: JupyterServer | undefined;
    let h: Harness | undefined;
    try {
      jupyter = await JupyterServer.startOn(host);
      expect(new URL(jupyter.url).hostname).toBe(host.address);
      h = await serverFor(jupyter.url, jupyter.token, calls);
      // Plain http to an address other than loopback is said plainly.
      const health = (await h.call("python_health")).structuredContent;
      expect(health.kernel_servers[0].warning).toContain("unencrypted");
      await exercise(h, calls);
      expect(await jupyter.kernels()).toEqual([]);
    } finally {
      await h?.close();
      calls.remove();
      await jupyter?.stop();
      await host.destroy();
    }
  }, 120_000);
});
