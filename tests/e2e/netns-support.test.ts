// The test support for a second host (tests/support/netns.ts) checks itself: a Jupyter Server started in
// a network namespace of its own answers from this one at the namespace's address, over the veth, and
// not on this host's loopback; its kernels run there too; stopping it and destroying the host leaves no
// process, namespace or interface behind.
import { describe, expect, test } from "bun:test";
import { pidAlive, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { netnsMissing, SecondHost } from "../support/netns.ts";

const missing = netnsMissing() ?? jupyterMissing();
if (missing) console.warn(`skipping the second host self-check: ${missing}`);

function ipOut(args: string[]): string {
  return Bun.spawnSync(["ip", ...args], { env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } }).stdout.toString();
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

describe.skipIf(missing !== undefined)("a second host (network namespace) for tests", () => {
  test("a Jupyter Server in it answers at its address only, and nothing is left after", async () => {
    const host = await SecondHost.create();
    let jupyter: JupyterServer | undefined;
    try {
      expect(host.address).toMatch(/^10\.231\.\d+\.\d+$/);
      expect(ipOut(["netns", "list"])).toContain(host.name);

      jupyter = await JupyterServer.startOn(host);
      const { port } = new URL(jupyter.url);
      expect(jupyter.url).toBe(`http://${host.address}:${port}/`);
      const headers = { authorization: `token ${jupyter.token}` };

      const specs = await fetch(`${jupyter.url}api/kernelspecs`, { headers });
      expect(specs.status).toBe(200);
      expect(((await specs.json()) as { kernelspecs: object }).kernelspecs).toHaveProperty("python3");

      // Not on this host's loopback: that port is nobody's here.
      const local = await fetch(`http://127.0.0.1:${port}/api/kernelspecs`, { headers }).then(
        (response) => `answered ${response.status}`,
        (error: Error) => `refused: ${error.message}`,
      );
      expect(local).toStartWith("refused");

      // A kernel starts inside (connected to the server over the namespace's loopback) and runs code sent
      // from here.
      const started = await fetch(`${jupyter.url}api/kernels`, {
        method: "POST",
        headers,
        body: JSON.stringify({ name: "python3" }),
      });
      expect(started.status).toBe(201);
      const { id } = (await started.json()) as { id: string };
      expect(
        await execute(jupyter, id, "sorted(name for _, name in __import__('socket').if_nameindex())"),
      ).toBe(`['lo', '${host.hostInterface}n']`);
      expect(await jupyter.kernels()).toEqual([id]);
      // The server and its kernel, and nothing else, run in the namespace.
      expect((await host.pids()).length).toBe(2);

      await jupyter.stop();
      jupyter = undefined;
      await waitFor(async () => (await host.pids()).length === 0, { what: "the kernel to end" });
    } finally {
      await jupyter?.stop();
      const pids = await host.pids();
      await host.destroy();
      for (const pid of pids) expect(pidAlive(pid)).toBe(false);
    }
    expect(ipOut(["netns", "list"])).not.toContain(host.name);
    expect(ipOut(["-br", "link"])).not.toContain(host.hostInterface);
    expect(ipOut(["-4", "-br", "addr"])).not.toContain(host.hostAddress);
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
