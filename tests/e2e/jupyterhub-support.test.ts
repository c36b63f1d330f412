// The test support for a JupyterHub (tests/support/jupyterhub.ts) checks itself: the user's server answers
// through the hub's proxy with the user's token, and refuses without it; a kernel started there talks over
// its WebSocket through the proxy; stopping the hub leaves no process (hub, proxy, single-user server or
// kernel) and no directory behind.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { pidAlive, waitFor } from "../support/harness.ts";
import { JupyterHub, jupyterhubMissing } from "../support/jupyterhub.ts";

const missing = jupyterhubMissing();
if (missing) console.warn(`skipping the JupyterHub self-check: ${missing}`);

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

describe.skipIf(missing !== undefined)("a JupyterHub for tests", () => {
  test("the user's server answers through the proxy with the user's token only; stop leaves nothing", async () => {
    const started = performance.now();
    const hub = await JupyterHub.start();
    let pids: number[] = [];
    try {
      console.log(`JupyterHub started in ${Math.round(performance.now() - started)} ms`);
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
      await hub.stop();
      console.log(`JupyterHub stopped in ${Math.round(performance.now() - stopping)} ms`);
    }
    expect(hub.pids()).toEqual([]);
    await waitFor(() => pids.every((pid) => !pidAlive(pid)), { what: "the hub's processes to be gone" });
    expect(existsSync(hub.dir)).toBe(false);
  }, 120_000);
});
