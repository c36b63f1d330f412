// src/kernels/jupyter.ts against a real Jupyter Server on loopback (token auth): what sessions on kernels
// will be built on. A kernel starts and says it is Python; a cell's user expression comes back; a second
// link attached to the same kernel sees the same variables (as a person's notebook would); an interrupt
// stops a running cell; shutdown removes the kernel from the server; a wrong token is refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { KernelServer } from "../../src/kernels/config.ts";
import { JupyterLink } from "../../src/kernels/jupyter.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";

const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the Jupyter link tests: ${noJupyter}`);

const serverFor = (jupyter: JupyterServer, token = jupyter.token): KernelServer =>
  jupyter.entry("test", token);

describe.skipIf(noJupyter !== undefined)("the Jupyter link", () => {
  let jupyter: JupyterServer;
  const quiet = console.debug;
  beforeAll(async () => {
    console.debug = () => {}; // the services announce every socket
    jupyter = await JupyterServer.start();
  }, 60_000);
  afterAll(async () => {
    await jupyter?.stop();
    console.debug = quiet;
  });

  const running = async () =>
    (
      (await (
        await fetch(`${jupyter.url}api/kernels`, { headers: { authorization: `token ${jupyter.token}` } })
      ).json()) as { id: string }[]
    ).map((kernel) => kernel.id);

  test("start, execute, attach, interrupt, shut down", async () => {
    const link = new JupyterLink(serverFor(jupyter));
    expect((await link.specs()).specs.python3?.language).toBe("python");
    const kernel = await link.start();
    try {
      expect((await kernel.info()).language).toBe("python");
      const set = await kernel.execute("shared = {'answer': 42}", {
        userExpressions: { seen: "shared['answer'] * 2" },
      });
      expect(set.status).toBe("ok");
      expect(set.userExpressions.seen?.data?.["text/plain"]).toBe("84");

      // A second client on the same kernel shares its namespace; detaching leaves the kernel running.
      const other = new JupyterLink(serverFor(jupyter));
      const attached = await other.attach(kernel.id);
      const read = await attached.execute("", { userExpressions: { value: "shared['answer']" } });
      expect(read.userExpressions.value?.data?.["text/plain"]).toBe("42");
      attached.detach();
      other.dispose();
      expect(await running()).toContain(kernel.id);

      const streams: string[] = [];
      // Interrupted once its output shows the cell runs, not after a pause long enough for that.
      let printed = () => {};
      const runs = new Promise<void>((resolve) => (printed = resolve));
      const sleeping = kernel.execute("import time\nprint('before', flush=True)\ntime.sleep(30)", {
        onIopub: (message) => {
          if (message.msgType !== "stream") return;
          streams.push(String(message.content.text));
          printed();
        },
      });
      await Promise.race([runs, sleeping]);
      const started = performance.now();
      await kernel.interrupt();
      expect((await sleeping).status).toBe("error");
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(streams.join("")).toContain("before");
    } finally {
      await kernel.shutdown();
      link.dispose();
    }
    expect(await running()).not.toContain(kernel.id);
  }, 60_000);

  // After a server restarts a kernel by itself, the services reconnect from a promise nobody awaits. If
  // the link is detached meanwhile (a seat moving to a new connection), that reconnect fails, and before
  // the fix the unhandled rejection ended the whole server. Here the reconnect is started the way the
  // services start it, and the link detached while it is under way.
  test("a reconnect under way when the link is detached ends quietly", async () => {
    const link = new JupyterLink(serverFor(jupyter));
    const kernel = await link.start();
    const other = new JupyterLink(serverFor(jupyter));
    try {
      const attached = await other.attach(kernel.id);
      const connection = (attached as unknown as { kernel: { reconnect(): Promise<void> } }).kernel;
      const reconnecting = connection.reconnect();
      attached.detach();
      await expect(reconnecting).resolves.toBeUndefined();
      // The kernel itself is untouched: the first link still runs cells on it.
      expect((await kernel.execute("1")).status).toBe("ok");
    } finally {
      other.dispose();
      await kernel.shutdown();
      link.dispose();
    }
  }, 60_000);

  test("a wrong token is refused", async () => {
    const link = new JupyterLink(serverFor(jupyter, "not-the-token"));
    await expect(link.specs()).rejects.toThrow();
    link.dispose();
  });
});
