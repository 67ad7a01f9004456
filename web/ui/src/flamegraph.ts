// Icicle (top-down flame graph) of the folded stacks the daemon exports: one line per stack,
// "root;caller;callee value". The stacks are the server's estimate (gprof's attribution of
// time along the call graph, gmon's stack builder); they are never rebuilt here from the call
// graph. Drawn by d3-flame-graph as SVG: one <g class="frame" name="fn"> per frame.
import flamegraph, { type FrameNode } from "d3-flame-graph";
import { select } from "d3-selection";
import { alertText, h, replace } from "./dom";

export interface Frame {
  name: string;
  value: number; // this frame and everything above it (what d3-flame-graph sizes by)
  self: number; // the stacks that end here
  delta?: number; // differential: b's value minus a's (scaled to b's total)
  // differential: whether the change is beyond sampling noise (more than twice its standard
  // deviation under no change: sampled counts are Poisson, so sqrt(b + a × scale²))
  significant?: boolean;
  children: Frame[];
}

// Folded text into a tree under one root "all". Lines that do not end in a number are skipped
// (a comment or a blank line).
export function parseFolded(text: string): Frame {
  const stacks: Stack[] = [];
  for (const line of text.split("\n")) {
    const m = /^(.*\S)\s+([0-9.eE+-]+)\s*$/.exec(line);
    if (!m) continue;
    const value = Number(m[2]);
    if (Number.isFinite(value) && value > 0) stacks.push({ path: m[1].split(";"), value });
  }
  return treeOf("all", stacks);
}

// Differential: b's stacks, each frame carrying the change of its time (with what it calls)
// from a to b, a scaled to b's total (so a run twice as long is not "slower" everywhere), and
// whether that change is beyond sampling noise. Returns the share of a's total in stacks b
// does not have (drawn nowhere: b has no frame for them) and the largest change beyond noise
// of a frame below the root (0: none; see frameColor).
export function differential(
  a: Frame,
  b: Frame,
): { tree: Frame; missing: number; largest: number } {
  const scale = a.value > 0 ? b.value / a.value : 0;
  let seen = 0;
  let largest = 0;
  const walk = (nb: Frame, na: Frame | undefined, depth: number) => {
    const before = (na?.value ?? 0) * scale;
    nb.delta = nb.value - before;
    const noise = Math.sqrt(nb.value + (na?.value ?? 0) * scale * scale);
    nb.significant = Math.abs(nb.delta) > 2 * noise;
    if (na) seen += na.self;
    if (depth > 0 && nb.significant) largest = Math.max(largest, Math.abs(nb.delta));
    for (const c of nb.children)
      walk(
        c,
        na?.children.find((x) => x.name === c.name),
        depth + 1,
      );
  };
  walk(b, a, 0);
  return { tree: b, missing: a.value > 0 ? 1 - seen / a.value : 0, largest };
}

// A frame's colour in the differential graph: grey for a change within sampling noise; else
// red for more time in B, blue for less, as strong as the change against the largest one —
// but never against less than 2 % of B's total, so small real changes stay pale — with a
// square root, so that half the largest change is still clearly coloured.
export function frameColor(
  frame: Pick<Frame, "delta" | "significant">,
  largest: number,
  total: number,
): string {
  const delta = frame.delta ?? 0;
  if (!frame.significant || delta === 0) return "rgb(225,225,225)";
  const full = Math.max(largest, 0.02 * total);
  const strength = full > 0 ? Math.sqrt(Math.min(1, Math.abs(delta) / full)) : 0;
  const fade = Math.round(225 * (1 - strength));
  return delta > 0 ? `rgb(235,${fade},${fade})` : `rgb(${fade},${fade},235)`;
}

const pct = (part: number, whole: number) =>
  whole > 0 ? ((100 * part) / whole).toFixed(2) : "0.00";

// Draws `tree` into `box` (replacing what was there) at the box's width; `unit` names the
// folded values ("samples"). Frames a click zooms into; the search box highlights matches.
// With `largest` (from differential()), frames are coloured by their change. `onSelect` hears
// the function of a frame clicked (the profile page shows its source).
export function drawFlameGraph(
  box: HTMLElement,
  tree: Frame,
  unit: string,
  largest?: number,
  onSelect?: (name: string) => void,
): void {
  const diff = largest !== undefined;
  const details = h(
    "p",
    { class: "flame-details muted", "aria-live": "polite" },
    diff
      ? "Red: more of the time in B, blue: less, grey: within sampling noise (each frame with what it calls; A scaled to B's total). Click a frame to zoom."
      : "Click a frame to zoom; hover for its figures.",
  );
  const search = h("input", {
    type: "search",
    placeholder: "Highlight functions",
    "aria-label": "Highlight functions in the flame graph",
  }) as HTMLInputElement;
  const reset = h("button", { type: "button" }, "Reset zoom");
  const canvas = h("div", { class: "flame-canvas" });
  replace(box, h("div", { class: "flame-tools" }, search, reset), canvas, details);
  if (tree.value <= 0) {
    replace(canvas, h("p", { class: "muted" }, "No stacks: the profile has no samples."));
    return;
  }
  const total = tree.value;
  let chart: ReturnType<typeof flamegraph> | undefined;
  const draw = (shown: Frame, byName: boolean, into: HTMLElement) => {
    chart = flamegraph()
      .width(Math.max(320, Math.floor(canvas.clientWidth || box.clientWidth || 960)))
      .cellHeight(18)
      .minFrameSize(1)
      .transitionDuration(0)
      .inverted(true)
      .sort(byName)
      .setLabelHandler((d) =>
        diff
          ? `${d.data.name}: ${pct(d.value, total)} % of B, ${signedPct(d.data.delta ?? 0, total)} points from A`
          : `${d.data.name}: ${pct(d.value, total)} % (${Math.round(d.value).toLocaleString("en-US")} ${unit})`,
      )
      .setDetailsElement(details);
    if (onSelect) chart.onClick((d) => onSelect(d.data.name));
    if (diff)
      chart.setColorMapper((d: FrameNode, original: string) =>
        d.highlight ? original : frameColor(d.data, largest, total),
      );
    select(into).datum(shown).call(chart);
    const svg = into.querySelector("svg");
    svg?.setAttribute("role", "img");
    svg?.setAttribute("aria-label", diff ? "differential flame graph" : "flame graph");
  };
  replace(canvas);
  draw(tree, true, canvas);
  if (!diff) box.querySelector(".flame-tools")?.append(...stackViews(tree, canvas, draw));
  // The library takes a regular expression: the user's text is matched literally.
  const literal = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  search.addEventListener("input", () =>
    search.value.trim() ? chart?.search(literal(search.value.trim())) : chart?.clear(),
  );
  reset.addEventListener("click", () => chart?.resetZoom());
}

// The controls of speedscope's views of the same stacks (widest first, inverted, a function's
// sandwich) and pprof's filters (focus, ignore, hide), each redrawing `canvas` with `draw`.
function stackViews(
  tree: Frame,
  canvas: HTMLElement,
  draw: (shown: Frame, byName: boolean, into: HTMLElement) => void,
): HTMLElement[] {
  const render = (shown: Frame, byName: boolean) => {
    replace(canvas);
    draw(shown, byName, canvas);
  };
  const view = h(
    "select",
    { "aria-label": "Flame graph view", class: "flame-view" },
    h("option", { value: "top-down" }, "callers above (by name)"),
    h("option", { value: "left-heavy" }, "left heavy (widest first)"),
    h("option", { value: "inverted" }, "inverted (callers below)"),
    h("option", { value: "sandwich" }, "sandwich (callers and callees of the focus match)"),
  ) as HTMLSelectElement;
  const filter = (name: keyof StackFilter, hint: string) =>
    h("input", {
      type: "search",
      name,
      class: `flame-${name}`,
      placeholder: `${name} (regex)`,
      title: hint,
      "aria-label": `${name}: ${hint}`,
    }) as HTMLInputElement;
  const focus = filter("focus", "keep only the stacks through a matching function");
  const ignore = filter("ignore", "drop the stacks through a matching function");
  const hide = filter("hide", "take matching functions out of the stacks");
  const redraw = () => {
    let shown: Frame;
    try {
      shown = filterStacks(tree, { focus: focus.value, ignore: ignore.value, hide: hide.value });
    } catch (e) {
      replace(canvas, alertText(`Not a regular expression: ${(e as Error).message}`));
      return;
    }
    if (shown.value <= 0) {
      replace(canvas, h("p", { class: "muted" }, "No stacks pass these filters."));
      return;
    }
    if (view.value === "sandwich") {
      const name = busiestMatch(shown, focus.value);
      if (!name) {
        replace(canvas, h("p", { class: "muted" }, "Type a function in focus: its sandwich."));
        return;
      }
      const { callers, callees } = sandwich(shown, name);
      const above = h("div", { class: "sandwich-callers" });
      const below = h("div", { class: "sandwich-callees" });
      replace(
        canvas,
        h("h4", {}, `Callers of ${name} (below it)`),
        above,
        h("h4", {}, `Callees of ${name} (below it)`),
        below,
      );
      draw(leftHeavy(callers), false, above);
      draw(leftHeavy(callees), false, below);
      return;
    }
    if (view.value === "left-heavy") render(leftHeavy(shown), false);
    else if (view.value === "inverted") render(leftHeavy(invertedTree(shown)), false);
    else render(shown, true);
  };
  view.addEventListener("change", redraw);
  for (const input of [focus, ignore, hide]) input.addEventListener("change", redraw);
  return [view, focus, ignore, hide];
}

// The tree with every frame's children widest first (ties by name): speedscope's left heavy.
export function leftHeavy(tree: Frame): Frame {
  return {
    ...tree,
    children: tree.children
      .map(leftHeavy)
      .sort((a, b) => b.value - a.value || a.name.localeCompare(b.name)),
  };
}

// A stack: its frames below the root, and the samples that end there.
interface Stack {
  path: string[];
  value: number;
}

// Every stack of the tree.
function stacksOf(tree: Frame): Stack[] {
  const out: Stack[] = [];
  const walk = (node: Frame, path: string[]) => {
    if (node.self > 0) out.push({ path, value: node.self });
    for (const c of node.children) walk(c, [...path, c.name]);
  };
  walk(tree, []);
  return out;
}

// Stacks (paths below the root, samples ending there) into a tree under a root `name`.
function treeOf(name: string, stacks: Stack[]): Frame {
  const root: Frame = { name, value: 0, self: 0, children: [] };
  const index = new Map<Frame, Map<string, Frame>>();
  for (const { path, value } of stacks) {
    let node = root;
    root.value += value;
    for (const frame of path) {
      let children = index.get(node);
      if (!children) index.set(node, (children = new Map<string, Frame>()));
      let child = children.get(frame);
      if (!child) {
        child = { name: frame, value: 0, self: 0, children: [] };
        children.set(frame, child);
        node.children.push(child);
      }
      child.value += value;
      node = child;
    }
    node.self += value;
  }
  return root;
}

// pprof's filters over the stacks, each a regular expression on function names (empty: off):
// focus keeps the stacks through a matching function, ignore drops them, hide takes the
// matching frames out of every stack (their time goes to their callers).
export interface StackFilter {
  focus?: string;
  ignore?: string;
  hide?: string;
}
export function filterStacks(tree: Frame, f: StackFilter): Frame {
  const re = (text?: string) => (text?.trim() ? new RegExp(text.trim()) : undefined);
  const focus = re(f.focus),
    ignore = re(f.ignore),
    hide = re(f.hide);
  const kept = stacksOf(tree)
    .filter(({ path }) => !focus || path.some((n) => focus.test(n)))
    .filter(({ path }) => !ignore || !path.some((n) => ignore.test(n)))
    .map(({ path, value }) => ({ path: hide ? path.filter((n) => !hide.test(n)) : path, value }));
  return treeOf(tree.name, kept);
}

// speedscope's sandwich of one function: its callers (each path that reached it, read from it
// back to the root) and its callees (each path from it on), each a tree rooted at it. A
// recursive function is cut at its outermost frame, so no sample counts twice.
export function sandwich(tree: Frame, name: string): { callers: Frame; callees: Frame } {
  const up: Stack[] = [];
  const down: Stack[] = [];
  for (const { path, value } of stacksOf(tree)) {
    const at = path.indexOf(name);
    if (at < 0) continue;
    up.push({ path: path.slice(0, at).reverse(), value });
    down.push({ path: path.slice(at + 1), value });
  }
  return { callers: treeOf(name, up), callees: treeOf(name, down) };
}

// The function whose name `pattern` matches with the most samples through it; none without a
// pattern or a match.
export function busiestMatch(tree: Frame, pattern: string): string | undefined {
  if (!pattern.trim()) return undefined;
  const re = new RegExp(pattern.trim());
  const through = new Map<string, number>();
  for (const { path, value } of stacksOf(tree)) {
    for (const name of new Set(path.filter((n) => re.test(n))))
      through.set(name, (through.get(name) ?? 0) + value);
  }
  let best: string | undefined;
  for (const [name, value] of through) if (!best || value > (through.get(best) ?? 0)) best = name;
  return best;
}

// Each stack read from its last frame back to its root: the functions where time was spent at
// the top, the paths that called them below (speedscope's inverted view, pprof's -inverted).
// Every stack's samples land once; the root keeps the total.
export function invertedTree(tree: Frame): Frame {
  return treeOf(
    tree.name,
    stacksOf(tree).map(({ path, value }) => ({ path: [...path].reverse(), value })),
  );
}

const signedPct = (delta: number, total: number) =>
  (delta >= 0 ? "+" : "−") + pct(Math.abs(delta), total);

// A box for a flame graph, saying its stacks are on their way.
export function flameBox(id: string): HTMLElement {
  return h("div", { class: "flame", id }, h("p", { class: "muted" }, "Loading the stacks…"));
}

// Draws a flame graph into `flame` (`draw` loads its stacks), or says why it could not.
export async function drawStacks(flame: HTMLElement, draw: () => Promise<void>): Promise<void> {
  try {
    await draw();
  } catch (e) {
    replace(flame, alertText(`The stacks could not be loaded: ${(e as Error).message}`));
  }
}
