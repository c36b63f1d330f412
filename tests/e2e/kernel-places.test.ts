// Kernel sessions on the two other places an organisation runs Jupyter, end to end through the binary:
// a JupyterHub user server reached through the hub's proxy under /user/<name>/ with a hub API token (the
// path an organisation gives its users), and a Jupyter Server on a second host (a network namespace with
// its own address; nothing is shared over loopback). Each: values, streamed output, a picture, an mcp call
// through the local broker, cancel, and no kernel left after the session closes.
//
// The test support for each place checks itself on the same hub and host (starting a hub costs ~4 s of
// CPU, a Jupyter Server ~1 s), after the session test, as it ends them:
// - JupyterHub (tests/support/jupyterhub.ts): the user's server answers through the hub's proxy with the
//   user's token, and refuses without it; a kernel started there talks over its WebSocket through the
//   proxy; stopping the hub leaves no process (hub, proxy, single-user server or kernel) and no directory
//   behind.
// - A second host (tests/support/netns.ts): a Jupyter Server started in a network namespace of its own
//   answers from this one at the namespace's address, over the veth, and not on this host's loopback; its
//   kernels run there too; stopping it and destroying the host leaves no process, namespace or interface
//   behind.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, pidAlive, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { JupyterHub, jupyterhubMissing } from "../support/jupyterhub.ts";
import { netnsMissing, SecondHost } from "../support/netns.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";

const noHub = jupyterhubMissing();
if (noHub) console.warn(`skipping the JupyterHub kernel session test and self-check: ${noHub}`);
const noSecondHost = jupyterMissing() ?? netnsMissing();
if (noSecondHost)
  console.warn(`skipping the second-host kernel session test and self-check: ${noSecondHost}`);

function ipOut(args: string[]): string {
  return Bun.spawnSync(["ip", ...args], { env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } }).stdout.toString();
}

/** Sends a kernel_info_request on a kernel's channels WebSocket and resolves with the reply's status. */
async function kernelInfo(url: string, token: string): Promise<string> {
  const socket = new WebSocket(url, { headers: { authorization: `token ${token}` } });
  try {
    return await new Promise<string>((resolve, reject) => {
      socket.onerror = () => reject(new Error("WebSocket error"));
      socket.onclose = (event) => reject(new Error(`WebSocket closed: ${event.code}`));
      socket.onopen = () =>
        socket.send(
          JSON.stringify({
            header: {
              msg_id: crypto.randomUUID(),
              session: crypto.randomUUID(),
              username: "",
              msg_type: "kernel_info_request",
              version: "5.3",
              date: new Date().toISOString(),
            },
            parent_header: {},
            metadata: {},
            content: {},
            channel: "shell",
          }),
        );
      socket.onmessage = (event) => {
        const message = JSON.parse(String(event.data));
        if (message.msg_type === "kernel_info_reply") resolve(message.content.status);
      };
    });
  } finally {
    socket.onclose = null;
    socket.close();
  }
}

/** Runs `code` in kernel `id` over the server's websocket (from this namespace); its result's text. */
async function execute(jupyter: JupyterServer, id: string, code: string): Promise<string> {
  const url = `${jupyter.url.replace(/^http/, "ws")}api/kernels/${id}/channels?token=${jupyter.token}`;
  const socket = new WebSocket(url);
  const msgId = crypto.randomUUID();
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no result from the kernel for ${code}`)), 30_000);
      socket.onerror = () => reject(new Error(`websocket to ${url} failed`));
      socket.onopen = () =>
        socket.send(
          JSON.stringify({
            channel: "shell",
            header: {
              msg_id: msgId,
              msg_type: "execute_request",
              session: crypto.randomUUID(),
              username: "test",
              version: "5.3",
              date: new Date().toISOString(),
            },
            parent_header: {},
            metadata: {},
            content: { code, silent: false, store_history: false, user_expressions: {}, allow_stdin: false },
          }),
        );
      socket.onmessage = (event) => {
        const message = JSON.parse(String(event.data));
        if (message.parent_header?.msg_id !== msgId) return;
        if (message.msg_type === "execute_result") {
          clearTimeout(timer);
          resolve(message.content.data["text/plain"]);
        } else if (message.msg_type === "error") {
          clearTimeout(timer);
          reject(new Error(`${message.content.ename}: ${message.content.evalue}`));
        }
      };
    });
  } finally {
    socket.close();
  }
}

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

describe.skipIf(noHub !== undefined)("on a JupyterHub", () => {
  let hub: JupyterHub;
  /** The self-check stops the hub itself; otherwise it is stopped after the tests. */
  let stopped = false;
  beforeAll(async () => {
    const started = performance.now();
    hub = await JupyterHub.start();
    console.log(`JupyterHub started in ${Math.round(performance.now() - started)} ms`);
  }, 90_000);
  afterAll(async () => {
    if (hub && !stopped) await hub.stop();
  }, 60_000);

  describe("a kernel session on a JupyterHub user server", () => {
    test("through the hub's proxy under /user/<name>/ with a hub API token", async () => {
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
      }
    }, 120_000);
  });

  describe("a JupyterHub for tests", () => {
    // After the session test: it leaves a kernel running and ends with stopping the hub.
    test("the user's server answers through the proxy with the user's token only; stop leaves nothing", async () => {
      let pids: number[] = [];
      try {
        expect(hub.userUrl).toBe(`${hub.url}user/ana/`);
        expect(hub.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
        const headers = { authorization: `token ${hub.userToken}` };

        const specs = await fetch(`${hub.userUrl}api/kernelspecs`, { headers });
        expect(specs.status).toBe(200);
        expect(specs.headers.get("content-type")).toContain("application/json");
        expect(((await specs.json()) as { kernelspecs: object }).kernelspecs).toHaveProperty("python3");

        // Without the token: refused, or sent to log in.
        const anonymous = await fetch(`${hub.userUrl}api/kernelspecs`, { redirect: "manual" });
        expect([401, 403, 302]).toContain(anonymous.status);
        // Nor with a token that is nobody's.
        const bogus = await fetch(`${hub.userUrl}api/kernelspecs`, {
          headers: { authorization: "token not-a-token" },
          redirect: "manual",
        });
        expect([401, 403, 302]).toContain(bogus.status);

        // A kernel, reached over its WebSocket through the proxy; left running for stop() to end.
        const kernel = await fetch(`${hub.userUrl}api/kernels`, {
          method: "POST",
          headers,
          body: JSON.stringify({ name: "python3" }),
        });
        expect(kernel.status).toBe(201);
        const { id } = (await kernel.json()) as { id: string };
        const channels = `${hub.userUrl.replace(/^http/, "ws")}api/kernels/${id}/channels`;
        expect(await kernelInfo(channels, hub.userToken)).toBe("ok");

        // Hub, proxy, single-user server and kernel.
        pids = hub.pids();
        expect(pids.length).toBeGreaterThanOrEqual(4);
      } finally {
        const stopping = performance.now();
        stopped = true;
        await hub.stop();
        console.log(`JupyterHub stopped in ${Math.round(performance.now() - stopping)} ms`);
      }
      expect(hub.pids()).toEqual([]);
      await waitFor(() => pids.every((pid) => !pidAlive(pid)), { what: "the hub's processes to be gone" });
      expect(existsSync(hub.dir)).toBe(false);
    }, 120_000);
  });
});

describe.skipIf(noSecondHost !== undefined)("on a second host", () => {
  let host: SecondHost | undefined;
  /** Its Jupyter Server, until the self-check stops it. */
  let jupyter: JupyterServer | undefined;
  beforeAll(async () => {
    host = await SecondHost.create();
    jupyter = await JupyterServer.startOn(host);
  }, 60_000);
  afterAll(async () => {
    await jupyter?.stop();
    await host?.destroy();
  }, 60_000);

  describe("a kernel session on a second host", () => {
    test("a Jupyter Server in its own network namespace, reached over its own address", async () => {
      const server = jupyter as JupyterServer;
      const calls = new PeerCalls();
      let h: Harness | undefined;
      try {
        expect(new URL(server.url).hostname).toBe((host as SecondHost).address);
        h = await serverFor(server.url, server.token, calls);
        // Plain http to an address other than loopback is said plainly.
        const health = (await h.call("python_health")).structuredContent;
        expect(health.kernel_servers[0].warning).toContain("unencrypted");
        await exercise(h, calls);
        expect(await server.kernels()).toEqual([]);
      } finally {
        await h?.close();
        calls.remove();
      }
    }, 120_000);
  });

  describe("a second host (network namespace) for tests", () => {
    // After the session test: it ends with stopping the server and destroying the host.
    test("a Jupyter Server in it answers at its address only, and nothing is left after", async () => {
      const second = host as SecondHost;
      try {
        expect(second.address).toMatch(/^10\.231\.\d+\.\d+$/);
        expect(ipOut(["netns", "list"])).toContain(second.name);

        const server = jupyter as JupyterServer;
        const { port } = new URL(server.url);
        expect(server.url).toBe(`http://${second.address}:${port}/`);
        const headers = { authorization: `token ${server.token}` };

        const specs = await fetch(`${server.url}api/kernelspecs`, { headers });
        expect(specs.status).toBe(200);
        expect(((await specs.json()) as { kernelspecs: object }).kernelspecs).toHaveProperty("python3");

        // Not on this host's loopback: that port is nobody's here.
        const local = await fetch(`http://127.0.0.1:${port}/api/kernelspecs`, { headers }).then(
          (response) => `answered ${response.status}`,
          (error: Error) => `refused: ${error.message}`,
        );
        expect(local).toStartWith("refused");

        // A kernel starts inside (connected to the server over the namespace's loopback) and runs code
        // sent from here.
        const started = await fetch(`${server.url}api/kernels`, {
          method: "POST",
          headers,
          body: JSON.stringify({ name: "python3" }),
        });
        expect(started.status).toBe(201);
        const { id } = (await started.json()) as { id: string };
        expect(
          await execute(server, id, "sorted(name for _, name in __import__('socket').if_nameindex())"),
        ).toBe(`['lo', '${second.hostInterface}n']`);
        expect(await server.kernels()).toEqual([id]);
        // The server and its kernel, and nothing else, run in the namespace.
        expect((await second.pids()).length).toBe(2);

        await server.stop();
        jupyter = undefined;
        await waitFor(async () => (await second.pids()).length === 0, { what: "the kernel to end" });
      } finally {
        await jupyter?.stop();
        jupyter = undefined;
        const pids = await second.pids();
        await second.destroy();
        for (const pid of pids) expect(pidAlive(pid)).toBe(false);
      }
      expect(ipOut(["netns", "list"])).not.toContain(second.name);
      expect(ipOut(["-br", "link"])).not.toContain(second.hostInterface);
      expect(ipOut(["-4", "-br", "addr"])).not.toContain(second.hostAddress);
    }, 60_000);

    test("parallel hosts get names and subnets of their own", async () => {
      const hosts = await Promise.all([SecondHost.create(), SecondHost.create(), SecondHost.create()]);
      try {
        expect(new Set(hosts.map((host) => host.name)).size).toBe(3);
        expect(new Set(hosts.map((host) => host.hostInterface)).size).toBe(3);
        expect(new Set(hosts.map((host) => host.address)).size).toBe(3);
      } finally {
        await Promise.all(hosts.map((host) => host.destroy()));
      }
      for (const host of hosts) expect(ipOut(["netns", "list"])).not.toContain(host.name);
    });
  });
});
