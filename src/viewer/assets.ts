// The page, embedded in the binary when it is built (release/page.ts runs as a macro): plain HTML, CSS
// and one small script, served from memory. No CDN, no network, no front-end dependency.
import { pageFile, pageScript } from "../../release/page.ts" with { type: "macro" };

export const PAGE_HTML: string = pageFile("index.html");
export const PAGE_CSS: string = pageFile("page.css");
export const PAGE_SCRIPT: string = pageScript();
