// Kept kernel sessions (docs/kernels.md, "Keeping a kernel session"): a kept session's owned kernel is
// left running when its server exits and re-attached by the next server that opens the same name on
// the same kernel server, namespace and generation intact; one whose keep ran out is shut down by the
// next server started with that kernel server configured. Afterwards the Jupyter server runs none.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, Harness, pidAlive, waitFor } from "../support/harness.ts";
import { JupyterServer, jupyterMissing } from "../support/jupyter.ts";
import { run } from "../support/run.ts";

const noJupyter = jupyterMissing();
if (noJupyter) console.warn(`skipping the kept kernel tests: ${noJupyter}`);
const TOKEN_VAR = "KERNEL_TEST_TOKEN";

describe.skipIf(noJupyter !== undefined)("a kept kernel session", () => {
  let jupyter: JupyterServer;
  const debug = console.debug;
  beforeAll(async () => {
    console.debug = () => {};
    jupyter = await JupyterServer.start();
  }, 60_000);
  afterAll(async () => {
    console.debug = debug;
    if (jupyter) expect(await jupyter.stopListing()).toEqual([]);
  }, 60_000);

  /** A server with --kernels naming the Jupyter server "lab", in `home`'s home and project. */
  async function start(home: Harness): Promise<Harness> {
    const file = join(home.dir, "kernels.json");
    writeFileSync(
      file,
      JSON.stringify({ kernelServers: { lab: { url: jupyter.url, token: `\${${TOKEN_VAR}}` } } }),
    );
    return await Harness.start({
      args: ["--kernels", file],
      env: { [TOKEN_VAR]: jupyter.token },
      after: home,
    });
  }

  /** A home and project for the servers of one test (its own server exits at once). */
  async function homeFor(): Promise<Harness> {
    const home = await Harness.start({ args: [] });
    return home;
  }

  async function stopServer(server: Harness): Promise<void> {
    await server.client.close();
    await waitFor(() => !pidAlive(server.serverPid), { what: "the server to exit" });
  }

  test("its kernel outlives the server and is re-attached with its namespace and generation; closing it shuts it down", async () => {
    const home = await homeFor();
    const first = await start(home);
    const opened = (
      await first.call("python_session_open", { name: "gpu", kernel_server: "lab", keep: "1h" })
    ).structuredContent;
    expect(opened.kept).toBe(true);
    const cell = await first.call("execute_python", { session_id: opened.session_id, code: "v = 5\nv" });
    const generation = cell.structuredContent.generation;
    const kernelId = opened.environment.kernel.kernel_id;
    await stopServer(first);
    expect(await jupyter.kernels()).toEqual([kernelId]);
    const listed = await run([BINARY, "sessions", "--json"], { env: home.env(), timeoutMs: 20_000 });
    const kept = JSON.parse(listed.stdout).sessions;
    expect(kept.map((s: any) => [s.name, s.state, s.kernel])).toEqual([
      ["gpu", "parked", `kernel ${kernelId} on "lab"`],
    ]);

    const second = await start(home);
    const again = (await second.call("python_session_open", { name: "gpu", kernel_server: "lab" }))
      .structuredContent;
    expect(again.adopted).toBe(true);
    expect(again.generation).toBe(generation);
    expect(again.environment.kernel.kernel_id).toBe(kernelId);
    expect(again.environment.kernel.owned).toBe(true);
    const next = await second.call("execute_python", {
      session_id: again.session_id,
      code: "v + 1",
      expected_generation: generation,
    });
    expect(next.structuredContent.value).toBe(6);
    await second.call("python_session_close", { session_id: again.session_id });
    expect(await jupyter.kernels()).toEqual([]);
    await stopServer(second);
    await home.close();
  }, 120_000);

  test("a kept kernel whose keep ran out is shut down by the next server configured for its kernel server", async () => {
    const home = await homeFor();
    const first = await start(home);
    const opened = (
      await first.call("python_session_open", { name: "brief", kernel_server: "lab", keep: "1s" })
    ).structuredContent;
    await first.call("execute_python", { session_id: opened.session_id, code: "1" });
    await stopServer(first);
    expect(await jupyter.kernels()).toEqual([opened.environment.kernel.kernel_id]);
    const listed = await run([BINARY, "sessions", "--json"], { env: home.env(), timeoutMs: 20_000 });
    const expires = Date.parse(JSON.parse(listed.stdout).sessions[0].expires_at);
    await waitFor(() => Date.now() > expires, { what: "its keep to run out" });
    const second = await start(home);
    await waitFor(async () => (await jupyter.kernels()).length === 0, {
      timeoutMs: 20_000,
      what: "the expired kernel to be shut down",
    });
    await stopServer(second);
    await home.close();
  }, 120_000);
});
