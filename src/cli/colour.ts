// Colour for humans only: ANSI codes are written to a stream only when it is a terminal, unless the
// user says otherwise. FORCE_COLOR (any value but "0" or "false") forces them, as an explicit request
// should; NO_COLOR (any non-empty value) turns them off; FORCE_COLOR=0 also turns them off.

export type Paint = (text: string) => string;

export interface Palette {
  bold: Paint;
  dim: Paint;
  red: Paint;
  green: Paint;
  yellow: Paint;
  cyan: Paint;
}

export function colourEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== "") return force !== "0" && force !== "false";
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.TERM === "dumb") return false;
  return stream.isTTY === true;
}

const style =
  (enabled: boolean, open: number, close: number): Paint =>
  (text) =>
    enabled ? `\u001b[${open}m${text}\u001b[${close}m` : text;

export function palette(stream: { isTTY?: boolean }): Palette {
  const on = colourEnabled(stream);
  return {
    bold: style(on, 1, 22),
    dim: style(on, 2, 22),
    red: style(on, 31, 39),
    green: style(on, 32, 39),
    yellow: style(on, 33, 39),
    cyan: style(on, 36, 39),
  };
}
