// The one place that speaks the Jupyter Server API, through @jupyterlab/services (the client JupyterLab
// itself uses): the kernelspecs, and kernels started, attached to, executed on, interrupted, restarted and
// shut down. Three things are ours. The token travels in an Authorization header, never in a URL (a URL
// ends up in logs). Every message received is answered at once with a WebSocket pong: the Jupyter
// server's Nagle holds its next small write until our ACK, which the kernel would otherwise delay by
// 40 ms, on every round trip (docs/kernels.md, "Speed"). And a dropped WebSocket is reopened on our
// terms (reconnect.ts): an attempt that fails before it opens never reaches the services, whose answer to
// it is a pause of 10 to 30 s.
import {
  type Kernel,
  KernelAPI,
  KernelConnection,
  KernelMessage,
  KernelSpecAPI,
  ServerConnection,
} from "@jupyterlab/services";
import { KERNEL_REQUEST_TIMEOUT_MS } from "../limits.ts";
import type { KernelServer } from "./config.ts";
import { statusOf } from "./failure.ts";
import { type LinkState, Reconnector } from "./reconnect.ts";
import { type SocketWatch, socketClass } from "./socket.ts";

export interface LinkOptions {
  /** Pong after every message (default true); false is the naive client, for the bench's comparison. */
  promptAck?: boolean;
}

/** The reply of one execute_request and what its user expressions evaluated to. */
export interface Executed {
  status: "ok" | "error" | "abort";
  executionCount: number | null;
  userExpressions: Record<string, { status: string; data?: Record<string, unknown>; ename?: string }>;
}

export interface ExecuteOptions {
  silent?: boolean;
  storeHistory?: boolean;
  userExpressions?: Record<string, string>;
  allowStdin?: boolean;
  /** Every iopub message of this request (streams, displays, comm messages). */
  onIopub?: (message: { msgType: string; content: Record<string, unknown> }) => void;
  /** Answers the request's input requests (allowStdin); the answer is sent when it resolves. */
  onInput?: (prompt: string) => Promise<string>;
}

/** The kernel's execution state as its connection sees it ("idle", "busy", "restarting", "dead", ...). */
export type KernelStatus = Kernel.Status;
export type { LinkState } from "./reconnect.ts";

/** One kernel reached over its WebSocket. */
export class KernelLink {
  /** Set once we close the connection ourselves: nothing is tried or reported after that. */
  private detached = false;
  private readonly reconnector: Reconnector;

  constructor(
    private readonly kernel: Kernel.IKernelConnection,
    sockets: SocketWatch,
    exists: () => Promise<boolean>,
  ) {
    // When the server restarts a kernel on its own, the services reconnect from a promise nobody awaits,
    // which rejects when the connection is closed meanwhile (a seat moving to a new connection) or when
    // they give up: that unhandled rejection would end this process. Whether the connection came back
    // is the reconnector's to say.
    const reconnect = kernel.reconnect.bind(kernel);
    kernel.reconnect = () => reconnect().catch(() => {});
    this.reconnector = new Reconnector(
      {
        reopen: () => {
          if (this.detached || kernel.isDisposed) return;
          // The socket given up closes on its way out: not a failure to count.
          sockets.latest = undefined;
          void kernel.reconnect();
        },
        exists,
      },
      kernel.connectionStatus === "connected",
    );
    sockets.failed = (socket) => {
      if (socket === sockets.latest && !this.detached) this.reconnector.attemptFailed();
    };
    kernel.connectionStatusChanged.connect((_, status) => {
      if (this.detached || kernel.isDisposed) return;
      if (status === "connected") this.reconnector.connected();
      else if (status === "disconnected") this.reconnector.gaveUp();
      else if (this.reconnector.state === "connected") this.reconnector.dropped();
    });
  }

  get id(): string {
    return this.kernel.id;
  }

  /** The kernelspec it was started from. */
  get name(): string {
    return this.kernel.name;
  }

  get status(): KernelStatus {
    return this.kernel.status;
  }

  get connectionStatus(): LinkState {
    return this.reconnector.state;
  }

  /** Calls fn on every status change; returns the way to stop. */
  onStatus(fn: (status: KernelStatus) => void): () => void {
    const slot = (_: unknown, status: KernelStatus) => fn(status);
    this.kernel.statusChanged.connect(slot);
    return () => this.kernel.statusChanged.disconnect(slot);
  }

  /** Calls fn on every change of the connection's state (reconnect.ts); returns the way to stop. */
  onConnection(fn: (status: LinkState) => void): () => void {
    return this.reconnector.onState(fn);
  }

  /** Someone waits for the connection: while it is down, attempts keep coming for a whole wait. */
  want(): void {
    this.reconnector.want();
  }

  /**
   * The messaging session of the kernel process behind this connection, from a fresh kernel_info reply.
   * A kernel that was restarted (by its server, another client or a reconnect that found a new process)
   * answers with a new one.
   */
  async kernelSession(): Promise<string> {
    return (await this.shellReply("kernel_info_request", {})).header.session;
  }

  /** The kernel's language and version, from a kernel_info reply of our own (see `shellReply`). */
  async info(): Promise<{ language: string; version: string; implementation: string }> {
    const info = (await this.shellReply("kernel_info_request", {})).content as KernelMessage.IInfoReply;
    return {
      language: info.language_info.name,
      version: info.language_info.version ?? "",
      implementation: info.implementation,
    };
  }

  /**
   * Evaluates user expressions after an empty cell (no output, no history); resolves with the shell
   * reply, which carries their values.
   */
  async evaluate(userExpressions: Record<string, string>): Promise<Executed> {
    const reply = await this.shellReply("execute_request", {
      code: "",
      silent: true,
      store_history: false,
      user_expressions: userExpressions,
      allow_stdin: false,
      stop_on_error: false,
    });
    const content = reply.content as unknown as Record<string, unknown>;
    return {
      status: content.status as Executed["status"],
      executionCount: (content.execution_count as number | undefined) ?? null,
      userExpressions: (content.user_expressions ?? {}) as Executed["userExpressions"],
    };
  }

  /**
   * Resolves once the connection is open: the attempts keep coming while it waits, for as long as a
   * request to the server may take; rejects after that, or once the kernel is known to be gone.
   */
  private async open(): Promise<void> {
    if (this.reconnector.state === "connected") return;
    this.reconnector.want();
    let off = () => {};
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(
          () => reject(new Error("the kernel's connection did not open in time")),
          KERNEL_REQUEST_TIMEOUT_MS,
        );
        off = this.reconnector.onState((state) => {
          if (state === "connected") resolve();
          else if (state === "gone") reject(new Error("the kernel is gone"));
          // The attempts stopped with nobody else waiting: this wait still is.
          else if (state === "disconnected") this.reconnector.want();
        });
      });
    } finally {
      off();
      clearTimeout(timer);
    }
  }

  /**
   * A request answered by its shell reply alone. The services' own requests end with the kernel's
   * "idle" on iopub too, which a connection can miss: after a restart by another client iopub may never
   * reach it, and a connection opened while the server restarts a kernel can miss its first iopub
   * messages (Jupyter Server does not check a new socket's subscription while the kernel is busy), so the
   * services' own kernel_info after connecting waited forever now and then. Shell replies are not lost
   * that way.
   */
  private async shellReply(
    msgType: "kernel_info_request" | "execute_request",
    content: Record<string, unknown>,
  ): Promise<KernelMessage.IShellMessage> {
    // The services refuse (rather than queue) a kernel_info request while their first connection is
    // not open yet.
    if (msgType === "kernel_info_request") await this.open();
    // One of two shell requests, chosen at run time: more than createMessage's overloads can type.
    const create = KernelMessage.createMessage as (options: object) => KernelMessage.IShellMessage;
    const message = create({ msgType, channel: "shell", session: this.kernel.clientId, content });
    const future = this.kernel.sendShellMessage(message, true, true);
    return await new Promise<KernelMessage.IShellMessage>((resolve, reject) => {
      future.onReply = resolve;
      future.done.catch(reject);
    });
  }

  async execute(code: string, options: ExecuteOptions = {}): Promise<Executed> {
    const future = this.kernel.requestExecute({
      code,
      silent: options.silent ?? true,
      store_history: options.storeHistory ?? false,
      user_expressions: options.userExpressions ?? {},
      allow_stdin: options.allowStdin ?? false,
      stop_on_error: false,
    });
    this.follow(future, options);
    const reply = await future.done;
    const content = reply.content as unknown as Record<string, unknown>;
    return {
      status: content.status as Executed["status"],
      executionCount: (content.execution_count as number | undefined) ?? null,
      userExpressions: (content.user_expressions ?? {}) as Executed["userExpressions"],
    };
  }

  /** Opens a comm to a target the kernel registered (comm_open on the shell channel). */
  openComm(target: string, commId: string): void {
    const message = KernelMessage.createMessage({
      msgType: "comm_open",
      channel: "shell",
      session: this.kernel.clientId,
      content: { comm_id: commId, target_name: target, data: {} },
    });
    this.kernel.sendShellMessage(message, false, true);
  }

  /**
   * Sends a comm message (a shell request without a reply: the kernel runs its handler, then goes idle);
   * resolves once the kernel is idle again. Its iopub and stdin traffic reach `options` as for execute.
   */
  async message(commId: string, data: Record<string, unknown>, options: ExecuteOptions = {}): Promise<void> {
    const message = KernelMessage.createMessage({
      msgType: "comm_msg",
      channel: "shell",
      session: this.kernel.clientId,
      content: { comm_id: commId, data: data as never },
    });
    const future = this.kernel.sendShellMessage(message, false, true);
    this.follow(future, options);
    await future.done;
  }

  private follow(future: Pick<Kernel.IShellFuture, "onIOPub" | "onStdin">, options: ExecuteOptions): void {
    const { onIopub } = options;
    if (onIopub) {
      future.onIOPub = (message) =>
        onIopub({ msgType: message.header.msg_type, content: message.content as Record<string, unknown> });
    }
    const { onInput } = options;
    if (onInput) {
      future.onStdin = (message) => {
        if (message.header.msg_type !== "input_request") return;
        const prompt = String((message.content as { prompt?: unknown }).prompt ?? "");
        void onInput(prompt).then(
          (value) => this.kernel.sendInputReply({ status: "ok", value }, message.header as never),
          () => this.kernel.sendInputReply({ status: "ok", value: "" }, message.header as never),
        );
      };
    }
  }

  interrupt(): Promise<void> {
    return this.kernel.interrupt();
  }

  restart(): Promise<void> {
    return this.kernel.restart();
  }

  /** Stops the kernel on its server (DELETE). */
  shutdown(): Promise<void> {
    return this.kernel.shutdown();
  }

  /** Closes our connection and leaves the kernel running (an attached kernel is not ours to stop). */
  detach(): void {
    this.detached = true;
    this.reconnector.stop();
    this.kernel.dispose();
  }
}

/** One Jupyter server, with this server's token and the prompt acknowledgement. */
export class JupyterLink {
  private readonly settings: ServerConnection.ISettings;
  private readonly connections = new Set<KernelConnection>();
  /** The sockets of each connection, by its client id (the session_id in the socket's URL). */
  private readonly sockets = new Map<string, SocketWatch>();

  constructor(
    readonly server: KernelServer,
    options: LinkOptions = {},
  ) {
    const headers: Record<string, string> = server.authorization
      ? { authorization: server.authorization }
      : {};
    const AuthorizedSocket = socketClass(headers, options.promptAck ?? true, this.sockets);
    const base = server.url;
    const { ca } = server;
    const startMs = server.startTimeoutMs;
    this.settings = ServerConnection.makeSettings({
      baseUrl: base,
      wsUrl: base.replace(/^http/, "ws"),
      // REST requests get "Authorization: token …" from the services; the socket from AuthorizedSocket.
      appendToken: false,
      token: server.authorization?.replace(/^token /, "") ?? "",
      // Every request has a deadline (a kernel start the entry's own), and a redirect (a hub's login
      // page) is an answer to report, not a page to follow.
      fetch: (request: Request) => {
        const starting =
          request.method === "POST" && /\/api\/kernels\/?$/.test(new URL(request.url).pathname);
        const init = {
          redirect: "manual",
          signal: AbortSignal.timeout(starting ? startMs : KERNEL_REQUEST_TIMEOUT_MS),
          ...(ca ? { tls: { ca } } : {}),
        };
        return fetch(request, init as RequestInit);
      },
      WebSocket: AuthorizedSocket,
    });
  }

  /** Whether a kernel of that id runs there now (undefined: it does not). */
  async running(id: string): Promise<Kernel.IModel | undefined> {
    return await KernelAPI.getKernelModel(id, this.settings);
  }

  /** Stops a kernel by id (DELETE), whether or not we are connected to it; a kernel already gone is fine. */
  async shutdown(id: string): Promise<void> {
    try {
      await KernelAPI.shutdownKernel(id, this.settings);
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  }

  /** The kernelspecs the server offers (with their language) and its default. */
  async specs(): Promise<{ default: string; specs: Record<string, { language: string }> }> {
    const answer = await KernelSpecAPI.getSpecs(this.settings);
    const specs: Record<string, { language: string }> = {};
    for (const [name, spec] of Object.entries(answer.kernelspecs))
      specs[name] = { language: spec?.language ?? "" };
    return { default: answer.default, specs };
  }

  /** Starts a kernel of `name` (else the entry's, else the server's default). */
  async start(name?: string): Promise<KernelLink> {
    const wanted = name ?? this.server.kernel;
    const model = await KernelAPI.startNew(wanted ? { name: wanted } : {}, this.settings);
    return this.connect(model);
  }

  /** Connects to a kernel already running there (a notebook's, for instance). */
  async attach(id: string): Promise<KernelLink> {
    const model = await KernelAPI.getKernelModel(id, this.settings);
    if (!model) throw new Error(`no kernel ${id} on ${this.server.name}`);
    return this.connect(model);
  }

  /** Closes every connection of this link; kernels keep running unless shut down. */
  dispose(): void {
    for (const connection of this.connections) connection.dispose();
    this.connections.clear();
    this.sockets.clear();
  }

  /** Connects to the kernel a model describes. No KernelManager: it would poll the server's kernel list. */
  connect(model: Kernel.IModel): KernelLink {
    // The connection opens its first socket as it is made: its watch must be there first.
    const clientId = crypto.randomUUID();
    const watch: SocketWatch = { latest: undefined, failed: () => {} };
    this.sockets.set(clientId, watch);
    const connection = new KernelConnection({
      model,
      serverSettings: this.settings,
      handleComms: false,
      clientId,
    });
    this.connections.add(connection);
    connection.disposed.connect(() => {
      this.connections.delete(connection);
      this.sockets.delete(clientId);
    });
    const exists = async () => {
      const found = await this.running(model.id);
      return found !== undefined && found.execution_state !== "dead";
    };
    return new KernelLink(connection, watch, exists);
  }
}
