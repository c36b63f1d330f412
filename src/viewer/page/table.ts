// A DataFrame or Series preview back into rows and columns. The worker writes its previews as
// right-aligned columns two spaces apart, the same in every row, so a column edge is wherever every row
// has at least two spaces at the same place. The result is checked against value_info (the column names
// must come out as the worker listed them); when anything does not fit, the caller shows the text.

export interface ValueInfo {
  type: string;
  shape: number[];
  dtype?: string;
  columns?: string[];
  columns_truncated?: boolean;
}

export interface Table {
  caption: string;
  header: string[];
  rows: string[][];
  footer?: string;
}

/** Cells of each line, split where every line has two or more spaces. */
function columns(lines: string[]): string[][] | undefined {
  const width = Math.max(0, ...lines.map((line) => line.length));
  const blank: boolean[] = [];
  for (let at = 0; at < width; at++) blank.push(lines.every((line) => (line[at] ?? " ") === " "));
  const spans: [number, number][] = [];
  let start = -1;
  for (let at = 0; at <= width; at++) {
    const gap = at === width || (blank[at] && blank[at + 1]) || (blank[at] && blank[at - 1]);
    if (!gap && start === -1) start = at;
    if (gap && start !== -1) {
      spans.push([start, at]);
      start = -1;
    }
  }
  if (spans.length === 0) return undefined;
  // Right-aligned: a cell may start left of its column's widest one, so each span reaches back to
  // the previous edge.
  return lines.map((line) =>
    spans.map(([, end], index) =>
      line.slice(index === 0 ? 0 : (spans[index - 1] as [number, number])[1], end).trim(),
    ),
  );
}

export function tableOf(preview: string, info: ValueInfo): Table | undefined {
  const lines = preview.split("\n");
  const caption = lines.shift() ?? "";
  const kind = info.type.split(".").pop();
  if (kind === "DataFrame") {
    const footer = lines[lines.length - 1]?.startsWith("dtypes:") ? lines.pop() : undefined;
    const cells = columns(lines);
    const [header, ...rows] = cells ?? [];
    if (header?.[0] !== "") return undefined;
    const names = new Set(info.columns ?? []);
    // Names the worker shows differently (not plain strings) are not in value_info as such: trust only
    // frames whose every shown name is listed, or is the "..." of left-out columns.
    if (!header.slice(1).every((name) => name === "..." || names.has(name))) return undefined;
    if (rows.some((row) => row.length !== header.length)) return undefined;
    return { caption, header, rows, footer };
  }
  if (kind === "Series") {
    const cells = columns(lines);
    if (!cells || cells.some((row) => row.length !== 2)) return undefined;
    const shown = /, name (.*)$/.exec(caption)?.[1] ?? "value";
    // A string name is previewed quoted; the quotes are not part of it.
    const name = /^"[^"\\]*"$/.test(shown) ? shown.slice(1, -1) : shown;
    return { caption, header: ["", name], rows: cells };
  }
  return undefined;
}
