// A second host for tests: a network namespace of its own, joined to this one by a veth pair on a /30
// of its own (this side .1, the namespace .2), in 10.231.0.0/16 or, for hosts a contained cell reaches
// through the sandbox's proxy, in 198.18.0.0/15 (the benchmarking range: the proxy refuses loopback and
// this host's own addresses, and its NO_PROXY sends the private ranges around it). What runs in it
// (`wrap`, `serve`) is reachable from here only at `address`, not on this host's loopback, and only
// through the veth: `create` checks the route before returning, so no test traffic takes the default
// route off this machine. Making one needs root (CAP_SYS_ADMIN for `ip netns add`, CAP_NET_ADMIN for the
// veth) and iproute2's `ip`; tests that need it skip, saying why, elsewhere.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const HTTP_HOST = resolve(import.meta.dir, "../fixtures/hosts/http-host.ts");
const IP = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].find((path) => existsSync(path));
const PREFIX = "rmcp";
/** Who made each live namespace (a file per name holding the test process's pid): a SIGKILLed test
 * process runs no exit handler, so the next `create` removes the namespaces of makers that are gone. */
const OWNERS = join(tmpdir(), "repl-mcp-test-netns");

function randomHex(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
}

function ipSync(args: string[]): { ok: boolean; out: string; err: string } {
  const result = Bun.spawnSync([IP ?? "ip", ...args], { stdout: "pipe", stderr: "pipe" });
  return { ok: result.exitCode === 0, out: result.stdout.toString(), err: result.stderr.toString().trim() };
}

async function ip(args: string[]): Promise<string> {
  const proc = Bun.spawn([IP ?? "ip", ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`ip ${args.join(" ")}: ${err.trim() || `exit code ${code}`}`);
  return out;
}

let missing: string | undefined | null = null;

/** Why a second host (network namespace) cannot be made here, or undefined. Probes once. */
export function netnsMissing(): string | undefined {
  if (missing !== null) return missing;
  missing = probe();
  return missing;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return "network namespaces are Linux only";
  if (!IP) return "iproute2's `ip` is not installed (install the Debian package iproute2)";
  const id = randomHex(4);
  const ns = `${PREFIX}-probe-${id}`;
  const veth = `${PREFIX}p${id}`;
  const added = ipSync(["netns", "add", ns]);
  if (!added.ok) return `cannot make a network namespace (ip netns add, needs root): ${added.err}`;
  try {
    const linked = ipSync(["link", "add", veth, "type", "veth", "peer", "name", `${veth}n`, "netns", ns]);
    if (!linked.ok) return `cannot make a veth pair into a network namespace (ip link add): ${linked.err}`;
    ipSync(["link", "del", veth]);
    return undefined;
  } finally {
    ipSync(["netns", "del", ns]);
  }
}

/** Removes the namespaces (and their veth pairs and processes) whose making test process has died. */
function sweepOrphans(): void {
  let names: string[] = [];
  try {
    names = readdirSync(OWNERS);
  } catch {
    return;
  }
  for (const name of names) {
    const owner = Number(readFileSync(join(OWNERS, name), "utf8"));
    if (owner > 0 && processAlive(owner)) continue;
    for (const pid of ipSync(["netns", "pids", name]).out.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {}
    }
    ipSync(["link", "del", name.replace(`${PREFIX}-`, PREFIX)]);
    ipSync(["netns", "del", name]);
    rmSync(join(OWNERS, name), { force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The second hosts not yet destroyed, removed (synchronously) if the test process exits first. */
const live = new Set<SecondHost>();
process.on("exit", () => {
  for (const host of live) host.destroySync();
});

/**
 * Where a second host's /30 may be picked, by the range's first address, and its prefix length:
 * a private range, which the sandbox's proxy never dials (its NO_PROXY lists it), and the benchmarking
 * range (RFC 2544), which it dials like any host outside.
 */
export const RANGES = { "10.231.0.0": 16, "198.18.0.0": 15 } as const;

/** IPv4 dotted quad as a number, and back. */
const toNumber = (address: string) => address.split(".").reduce((n, part) => n * 256 + Number(part), 0);
const toAddress = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");

/**
 * Whether the /30 at `base` overlaps an address or (non-default) route of this host, per
 * `ip -j -4 addr` and `ip -j -4 route`; `except` is our own veth, whose addresses do not count.
 */
async function subnetTaken(base: number, except?: string): Promise<boolean> {
  const overlaps = (address: string, prefix: number) => {
    const size = 2 ** (32 - prefix);
    const start = Math.floor(toNumber(address) / size) * size;
    return start < base + 4 && base < start + size;
  };
  const links = JSON.parse(await ip(["-j", "-4", "addr", "show"])) as {
    ifname: string;
    addr_info?: { local: string; prefixlen: number }[];
  }[];
  for (const link of links) {
    if (link.ifname === except) continue;
    for (const info of link.addr_info ?? []) if (overlaps(info.local, info.prefixlen)) return true;
  }
  const routes = JSON.parse(await ip(["-j", "-4", "route", "show", "table", "all"])) as {
    dst: string;
    dev?: string;
    type?: string;
  }[];
  for (const route of routes) {
    if (route.dst === "default" || route.dev === except) continue;
    const [address = "", prefix = "32"] = route.dst.split("/");
    if (/^\d+\.\d+\.\d+\.\d+$/.test(address) && overlaps(address, Number(prefix))) return true;
  }
  return false;
}

export class SecondHost {
  private destroyed = false;

  private constructor(
    /** The namespace's name (`ip netns list`). */
    readonly name: string,
    /** The veth end on this host (its peer, inside, is `${hostInterface}n`). */
    readonly hostInterface: string,
    /** This host's address on the veth, e.g. "10.231.7.1". */
    readonly hostAddress: string,
    /** The namespace's address, e.g. "10.231.7.2": the only way in from here. */
    readonly address: string,
  ) {}

  /**
   * Makes one with unique names and a /30 of `range` no other interface or route here uses (picked at
   * random; checked again once ours is up, against a parallel test having picked the same one).
   */
  static async create({ range = "10.231.0.0" }: { range?: keyof typeof RANGES } = {}): Promise<SecondHost> {
    const why = netnsMissing();
    if (why) throw new Error(why);
    sweepOrphans();
    const [first, prefix] = [range, RANGES[range]];
    for (let attempt = 0; attempt < 20; attempt++) {
      const [random = 0] = crypto.getRandomValues(new Uint32Array(1));
      const base = toNumber(first) + 4 * (random % 2 ** (30 - prefix));
      if (await subnetTaken(base)) continue;
      const id = randomHex(4);
      const host = new SecondHost(
        `${PREFIX}-${id}`,
        `${PREFIX}${id}`,
        toAddress(base + 1),
        toAddress(base + 2),
      );
      live.add(host);
      try {
        await host.setUp();
        if (!(await subnetTaken(base, host.hostInterface))) {
          await host.checkRoute();
          return host;
        }
      } catch (error) {
        await host.destroy();
        throw error;
      }
      await host.destroy();
    }
    throw new Error(`found no free /30 in ${first}/${prefix} for a second host`);
  }

  private async setUp(): Promise<void> {
    const inside = `${this.hostInterface}n`;
    mkdirSync(OWNERS, { recursive: true });
    writeFileSync(join(OWNERS, this.name), String(process.pid));
    await ip(["netns", "add", this.name]);
    await ip(["link", "add", this.hostInterface, "type", "veth", "peer", "name", inside, "netns", this.name]);
    await ip(["addr", "add", `${this.hostAddress}/30`, "dev", this.hostInterface]);
    await ip(["link", "set", this.hostInterface, "up"]);
    await ip(["-n", this.name, "addr", "add", `${this.address}/30`, "dev", inside]);
    await ip(["-n", this.name, "link", "set", inside, "up"]);
    await ip(["-n", this.name, "link", "set", "lo", "up"]);
  }

  /** Refuses a host whose address this host would reach other than through its own veth. */
  private async checkRoute(): Promise<void> {
    const [route] = JSON.parse(await ip(["-j", "route", "get", this.address])) as { dev?: string }[];
    if (route?.dev !== this.hostInterface)
      throw new Error(`${this.address} is routed through ${route?.dev}, not the second host's veth`);
  }

  /**
   * `argv` run inside the namespace (`ip netns exec`, which execs it: the spawned pid is the command's
   * own). Give the command an absolute path or a PATH that holds it.
   */
  wrap(argv: string[]): string[] {
    return [IP ?? "ip", "netns", "exec", this.name, ...argv];
  }

  /**
   * An HTTP server inside (tests/fixtures/hosts/http-host.ts), serving the files under `root`, with
   * every request it receives kept in `requests`. Stopped with the host.
   */
  async serve(root: string): Promise<HostedHttp> {
    const proc = Bun.spawn(this.wrap([process.execPath, HTTP_HOST, this.address, root]), {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "inherit",
    });
    const served = new HostedHttp(this.address, proc);
    await served.started();
    return served;
  }

  /** The pids of the processes running inside it now. */
  async pids(): Promise<number[]> {
    if (this.destroyed) return [];
    const out = await ip(["netns", "pids", this.name]).catch(() => "");
    return out.split(/\s+/).filter(Boolean).map(Number);
  }

  /** Kills what still runs inside (SIGKILL) and removes the namespace and the veth pair. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    for (let round = 0; round < 200; round++) {
      const pids = await this.pids();
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {}
      }
      await Bun.sleep(25);
    }
    // Deleting one end deletes the pair; with no process left inside, removing its name ends the namespace.
    await ip(["link", "del", this.hostInterface]).catch(() => undefined);
    await ip(["netns", "del", this.name]).catch(() => undefined);
    rmSync(join(OWNERS, this.name), { force: true });
    this.destroyed = true;
    live.delete(this);
  }

  /** `destroy` for the exit handler, where nothing asynchronous runs. */
  destroySync(): void {
    if (this.destroyed) return;
    for (const pid of ipSync(["netns", "pids", this.name]).out.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {}
    }
    ipSync(["link", "del", this.hostInterface]);
    ipSync(["netns", "del", this.name]);
    rmSync(join(OWNERS, this.name), { force: true });
    this.destroyed = true;
    live.delete(this);
  }
}

/** One request a second host's HTTP server received. */
export interface HostedRequest {
  method: string;
  path: string;
}

/** An HTTP server on a second host: where it listens, and what reached it. */
export class HostedHttp {
  port = 0;
  readonly requests: HostedRequest[] = [];
  private readonly listening: Promise<void>;

  constructor(
    readonly address: string,
    private readonly proc: ReturnType<typeof Bun.spawn>,
  ) {
    this.listening = this.read();
  }

  /** `http://address:port`. */
  get origin(): string {
    return `http://${this.address}:${this.port}`;
  }

  /** The requests whose path starts with `prefix`. */
  received(prefix: string): HostedRequest[] {
    return this.requests.filter((request) => request.path.startsWith(prefix));
  }

  async started(): Promise<void> {
    await this.listening;
    if (this.port === 0) throw new Error("the second host's HTTP server did not start");
  }

  private read(): Promise<void> {
    let ready!: () => void;
    const listening = new Promise<void>((resolve) => {
      ready = resolve;
    });
    void (async () => {
      const decoder = new TextDecoder();
      let buffered = "";
      for await (const chunk of this.proc.stdout as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true });
        let end = buffered.indexOf("\n");
        while (end !== -1) {
          const line = JSON.parse(buffered.slice(0, end));
          buffered = buffered.slice(end + 1);
          if (typeof line.port === "number") {
            this.port = line.port;
            ready();
          } else this.requests.push(line as HostedRequest);
          end = buffered.indexOf("\n");
        }
      }
      ready();
    })();
    return listening;
  }

  async stop(): Promise<void> {
    this.proc.kill("SIGKILL");
    await this.proc.exited;
  }
}
