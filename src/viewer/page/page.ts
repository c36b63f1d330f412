// The viewer's page: one event stream (server-sent events, no polling), and the DOM kept in step with it.
// Everything a cell produced is inserted as text (textContent), never as HTML; pictures come only from
// the viewer's own same-origin paths.
import { tableOf, type ValueInfo } from "./table.ts";

interface SessionView {
  session_id: string;
  name: string;
  project: string;
  interpreter: string;
  python_version: string | null;
  generation: number;
  state: string;
  active_run: string | null;
  kernel: string | null;
}

interface ArtifactLink {
  id: string;
  size: number;
  format: string;
  what: string;
  url: string;
}

interface RunView {
  session_id: string;
  run_id: string;
  source: string;
  /** "earlier": a run of an earlier server, in a session this one adopted. */
  status: "running" | "finished" | "failed" | "cancelled" | "earlier";
  started_at: number;
  elapsed_ms: number;
  stdout: string;
  stderr: string;
  omitted: { stdout: number; stderr: number };
  return_value?: string | null;
  value_info?: ValueInfo;
  error?: string | null;
  error_code?: string | null;
  truncated?: { stdout: boolean; stderr: boolean; return: boolean };
  displays?: { mime: string; text?: string; image?: string; artifact?: ArtifactLink }[];
  artifacts?: ArtifactLink[];
}

type QuestionView = {
  id: string;
  session_id: string;
  session_name: string | null;
  run_id: string | null;
  asked_at: number;
} & (
  | { kind: "approval"; server: string; tool: string; summary: string; arguments: string }
  | { kind: "input"; prompt: string; secret: boolean }
  | { kind: "network"; host: string; port: number }
);

type ViewerEvent =
  | { type: "hello"; sessions: SessionView[]; runs: RunView[]; questions: QuestionView[] }
  | { type: "question"; question: QuestionView }
  | { type: "question_closed"; id: string }
  | { type: "session"; session: SessionView }
  | { type: "session_closed"; session_id: string }
  | { type: "run"; run: RunView }
  | {
      type: "output";
      session_id: string;
      run_id: string;
      stdout: string;
      stderr: string;
      omitted: { stdout: number; stderr: number };
    }
  | { type: "notice"; text: string };

const sessionsEl = document.getElementById("sessions") as HTMLElement;
const connection = document.getElementById("connection") as HTMLElement;
const notices = document.getElementById("notices") as HTMLElement;
const questionsEl = document.getElementById("questions") as HTMLElement;

/** Each run's card and what the clock needs of it. */
const cards = new Map<string, { card: HTMLElement; view: RunView }>();

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function seconds(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function sessionSection(id: string): HTMLElement {
  let section = document.getElementById(`session-${id}`);
  if (!section) {
    section = el("section", "session");
    section.id = `session-${id}`;
    section.append(el("h2"), el("div", "meta"), el("div", "runs"));
    sessionsEl.append(section);
  }
  return section;
}

function showSession(view: SessionView): void {
  const section = sessionSection(view.session_id);
  section.classList.toggle("closed", view.state === "closed");
  (section.querySelector("h2") as HTMLElement).textContent = `Session ${view.name}`;
  const python = view.python_version
    ? `Python ${view.python_version} (${view.interpreter})`
    : view.interpreter;
  const where = view.kernel ? `${view.kernel} · ` : "";
  (section.querySelector(".meta") as HTMLElement).textContent =
    `${where}${view.project} · ${python} · generation ${view.generation} · ${view.state}`;
}

function labelled(card: HTMLElement, label: string, node: HTMLElement): void {
  card.append(el("div", "label", label), node);
}

function omittedText(omitted: { stdout: number; stderr: number }, truncated?: RunView["truncated"]): string {
  const parts = [];
  if (omitted.stdout) parts.push(`${omitted.stdout} characters of stdout`);
  if (omitted.stderr) parts.push(`${omitted.stderr} characters of stderr`);
  const cut = (["stdout", "stderr"] as const).filter((stream) => truncated?.[stream]);
  const notes = [];
  if (parts.length) notes.push(`… ${parts.join(" and ")} not shown on this page`);
  if (cut.length) notes.push(`… ${cut.join(" and ")} cut at the server's limit (the agent got the same)`);
  return notes.join("; ");
}

function valueNode(view: RunView): HTMLElement | undefined {
  const preview = view.return_value;
  if (preview === null || preview === undefined) return undefined;
  const table = view.value_info ? tableOf(preview, view.value_info) : undefined;
  if (!table) return el("pre", "value", preview);
  const box = el("div", "value");
  box.append(el("div", "caption", table.caption));
  const grid = el("table", "frame");
  const head = el("thead");
  const headRow = el("tr");
  for (const name of table.header) headRow.append(el("th", undefined, name));
  head.append(headRow);
  const body = el("tbody");
  for (const row of table.rows) {
    const tr = el("tr");
    row.forEach((cell, index) => {
      tr.append(el(index === 0 ? "th" : "td", undefined, cell));
    });
    body.append(tr);
  }
  grid.append(head, body);
  box.append(grid);
  if (table.footer) box.append(el("div", "caption", table.footer));
  return box;
}

/** Only the viewer's own paths: anything else a view might hold is never given to an element. */
function ownPath(path: string | undefined): string | undefined {
  return path && /^\/(display|artifact)\/[\w-]+\/[\w-]+(\/\d+)?$/.test(path) ? path : undefined;
}

function artifactItem(link: ArtifactLink): HTMLElement {
  const item = el("li");
  const url = ownPath(link.url);
  const anchor = el("a", undefined, `${link.what}: ${link.format}, ${sizeText(link.size)}`);
  if (url) {
    anchor.href = url;
    anchor.setAttribute("download", "");
  }
  item.append(anchor, el("span", "run-id", ` ${link.id}`));
  return item;
}

function cancelButton(view: RunView): HTMLElement {
  const button = el("button", "cancel", "Cancel") as HTMLButtonElement;
  button.type = "button";
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Cancelling…";
    try {
      const response = await fetch("/cancel", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ session_id: view.session_id, run_id: view.run_id }),
      });
      if (!response.ok) button.textContent = "Already over";
    } catch {
      button.textContent = "Cancel failed";
      button.disabled = false;
    }
  });
  return button;
}

/** Sends one answer; the card goes when the server withdraws the question (here and on every page). */
async function sendAnswer(card: HTMLElement, body: Record<string, unknown>): Promise<void> {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  const status = card.querySelector(".question-status") as HTMLElement;
  status.textContent = "Sending…";
  try {
    const response = await fetch("/answer", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    status.textContent = response.ok ? "Answered" : "Already answered or withdrawn";
  } catch {
    status.textContent = "Sending failed; try again";
    for (const button of card.querySelectorAll("button")) button.disabled = false;
  }
}

function button(label: string, className: string, onClick: () => void): HTMLButtonElement {
  const node = el("button", className, label) as HTMLButtonElement;
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function showQuestion(view: QuestionView): void {
  if (document.getElementById(`question-${view.id}`)) return;
  const card = el("article", `question ${view.kind}`);
  card.id = `question-${view.id}`;
  const where = `session ${view.session_name ?? view.session_id.slice(0, 8)}${view.run_id ? ` · run ${view.run_id.slice(0, 8)}` : " · artifact_forward"}`;
  if (view.kind === "approval" || view.kind === "network") {
    if (view.kind === "approval") {
      card.append(el("h2", undefined, `Allow ${view.server}.${view.tool}?`), el("div", "meta", where));
      if (view.summary) card.append(el("div", "summary", view.summary));
      labelled(card, "arguments", el("pre", "arguments", view.arguments));
    } else {
      card.append(
        el("h2", undefined, `Allow a connection to ${view.host}:${view.port}?`),
        el("div", "meta", where),
        el(
          "div",
          "summary",
          "A contained cell wants to reach a host the sandbox policy neither allows nor denies.",
        ),
      );
    }
    const id = view.id;
    const actions = el("div", "actions");
    actions.append(
      button("Allow once", "allow", () => void sendAnswer(card, { id, decision: "allow_once" })),
      button(
        "Allow for the session",
        "allow",
        () => void sendAnswer(card, { id, decision: "allow_session" }),
      ),
      button("Deny", "deny", () => void sendAnswer(card, { id, decision: "deny" })),
    );
    card.append(actions);
  } else {
    card.append(
      el("h2", undefined, view.secret ? "A cell asks for a password" : "A cell asks for input"),
      el("div", "meta", where),
      el("pre", "prompt", view.prompt),
    );
    const form = el("form", "actions") as HTMLFormElement;
    const box = el("input", "answer") as HTMLInputElement;
    box.type = view.secret ? "password" : "text";
    box.autocomplete = "off";
    box.setAttribute("aria-label", "Answer");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void sendAnswer(card, { id: view.id, value: box.value });
    });
    const send = el("button", "allow", "Send") as HTMLButtonElement;
    send.type = "submit";
    form.append(
      box,
      send,
      button("Don't answer", "deny", () => void sendAnswer(card, { id: view.id, declined: true })),
    );
    card.append(form);
  }
  card.append(el("div", "question-status"));
  questionsEl.append(card);
}

function fillCard(card: HTMLElement, view: RunView): void {
  card.replaceChildren();
  card.className = `run ${view.status}`;
  const head = el("div", "run-head");
  if (view.status === "earlier") {
    head.append(el("span", "status", "before adoption"), el("span", "run-id", view.run_id.slice(0, 8)));
  } else {
    head.append(
      el("span", "status", view.status),
      el("span", "elapsed", seconds(view.elapsed_ms)),
      el("span", "when", new Date(view.started_at).toLocaleTimeString()),
      el("span", "run-id", view.run_id.slice(0, 8)),
    );
  }
  if (view.status === "running") head.append(cancelButton(view));
  card.append(head);
  labelled(card, "source", el("pre", "source", view.source));
  const stdout = el("pre", "stdout", view.stdout);
  const stderr = el("pre", "stderr", view.stderr);
  stdout.hidden = view.stdout === "";
  stderr.hidden = view.stderr === "";
  card.append(stdout, stderr, el("div", "omitted", omittedText(view.omitted, view.truncated)));
  const value = valueNode(view);
  if (value) labelled(card, "value", value);
  for (const display of view.displays ?? []) {
    const image = ownPath(display.image);
    if (image) {
      const picture = el("img", "picture") as HTMLImageElement;
      picture.alt = display.mime;
      picture.src = image;
      card.append(picture);
    } else if (display.text !== undefined) labelled(card, display.mime, el("pre", "display", display.text));
  }
  if (view.error) labelled(card, view.error_code ?? "error", el("pre", "error", view.error));
  if (view.artifacts?.length) {
    const list = el("ul", "artifacts");
    for (const link of view.artifacts) list.append(artifactItem(link));
    labelled(card, "artifacts", list);
  }
}

function showRun(view: RunView): void {
  const known = cards.get(view.run_id);
  const card = known?.card ?? el("article");
  card.id = `run-${view.run_id}`;
  fillCard(card, view);
  cards.set(view.run_id, { card, view });
  if (!known) {
    // Newest first; runs from before an adoption (sent newest first) below this server's own.
    const runs = sessionSection(view.session_id).querySelector(".runs") as HTMLElement;
    if (view.status === "earlier") runs.append(card);
    else runs.prepend(card);
  }
}

function appendOutput(event: Extract<ViewerEvent, { type: "output" }>): void {
  const known = cards.get(event.run_id);
  if (!known) return;
  const { card, view } = known;
  view.stdout += event.stdout;
  view.stderr += event.stderr;
  view.omitted = event.omitted;
  for (const stream of ["stdout", "stderr"] as const) {
    const text = event[stream];
    if (!text) continue;
    const pre = card.querySelector(`pre.${stream}`) as HTMLElement;
    pre.hidden = false;
    pre.append(document.createTextNode(text));
    pre.scrollTop = pre.scrollHeight;
  }
  (card.querySelector(".omitted") as HTMLElement).textContent = omittedText(event.omitted);
}

function notice(text: string): void {
  const box = el("div", "notice", text);
  notices.append(box);
  while (notices.children.length > 3) notices.firstElementChild?.remove();
}

function handle(event: ViewerEvent): void {
  switch (event.type) {
    case "hello":
      cards.clear();
      sessionsEl.replaceChildren();
      for (const session of event.sessions) showSession(session);
      for (const run of event.runs) showRun(run);
      questionsEl.replaceChildren();
      for (const question of event.questions) showQuestion(question);
      break;
    case "question":
      showQuestion(event.question);
      break;
    case "question_closed":
      document.getElementById(`question-${event.id}`)?.remove();
      break;
    case "session":
      showSession(event.session);
      break;
    case "session_closed":
      document.getElementById(`session-${event.session_id}`)?.classList.add("closed");
      break;
    case "run":
      showRun(event.run);
      break;
    case "output":
      appendOutput(event);
      break;
    case "notice":
      notice(event.text);
      break;
  }
}

const stream = new EventSource("/events");
stream.addEventListener("open", () => {
  connection.textContent = "live";
  connection.className = "connection live";
});
stream.addEventListener("error", () => {
  const over = stream.readyState === EventSource.CLOSED;
  connection.textContent = over ? "disconnected: reload the page" : "reconnecting…";
  connection.className = "connection lost";
});
stream.addEventListener("message", (message) => handle(JSON.parse(message.data) as ViewerEvent));

// A clock for the running runs' elapsed time; it reads nothing from the server.
setInterval(() => {
  for (const { card, view } of cards.values()) {
    if (view.status !== "running") continue;
    const elapsed = card.querySelector(".elapsed");
    if (elapsed) elapsed.textContent = seconds(Date.now() - view.started_at);
  }
}, 500);
