// Fleet: the sessions of one build (optionally some boards or tags) merged into one profile,
// its flame graph, and per board its share of a function against the fleet's: boards whose
// share the test says differs from the rest (spread "outside") are marked in the plot and table.
import {
  api,
  exportFormats,
  selectionDownloads,
  type SelectionProfile,
  type Spread,
  type SpreadFunction,
} from "../api";
import { count, percent, seconds } from "../format";
import { alertText, downloadLinks, form, formText, h, link, replace, section } from "../dom";
import { navigate } from "../router";
import { buildSelection, buildsOf, shortId, type Build } from "../selection";
import { drawFlameGraph, drawStacks, flameBox, parseFolded } from "../flamegraph";

const list = (v: string | null) =>
  v
    ? v
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean)
    : [];

export async function fleetPage(main: HTMLElement, params: URLSearchParams) {
  const [sessions, formats] = await Promise.all([api.sessions(), exportFormats()]);
  const builds = buildsOf(sessions);
  const build = params.get("build_id") ?? builds[0]?.build_id ?? "";
  const boards = list(params.get("board"));
  const tags = list(params.get("tag"));
  const chosen = builds.find((b) => b.build_id === build);
  const intro = [
    h("h1", {}, "Fleet"),
    h(
      "p",
      { class: "muted" },
      "The sessions of one firmware build merged into one profile, and how each board's share of a function compares with the fleet's typical (median) board.",
    ),
    buildTable(builds, build),
    chosen ? selectionForm(chosen, boards, tags) : null,
  ];
  if (!build) {
    replace(
      main,
      ...intro,
      h(
        "p",
        { class: "muted" },
        "No stored session has a build-id yet: import captures with their ELF, or attach one.",
      ),
    );
    return;
  }
  const selection = buildSelection(build, boards, tags);
  let profile: SelectionProfile;
  try {
    profile = await api.selectionProfile(selection);
  } catch (e) {
    replace(main, ...intro, alertText((e as Error).message));
    return;
  }
  const fn = params.get("function") ?? defaultFunction(profile.spread);
  const flame = flameBox("flame-graph");
  replace(
    main,
    ...intro,
    h("h2", {}, `Merged profile of build ${shortId(build)}`),
    h(
      "p",
      { class: "meta", id: "fleet-summary" },
      `${profile.selection.sessions.length} sessions from ${profile.selection.boards.length} boards (${profile.selection.boards.join(", ")}) · ${seconds(profile.total_seconds)} s sampled (${count(profile.total_samples)} samples) · `,
      link(`/diff?${new URLSearchParams({ a: selection })}`, "diff against…", { id: "fleet-diff" }),
    ),
    h(
      "p",
      { class: "meta downloads" },
      "download ",
      downloadLinks(
        selectionDownloads(
          selection,
          formats.selection.filter((f) => !f.startsWith("cct-")),
        ),
      ),
    ),
    spreadSection(profile, fn, params),
    section("h-flame", "Flame graph (icicle) of the merged stacks", flame),
    section("h-fleet-flat", "Flat profile", flatTable(profile, params)),
  );
  await drawStacks(flame, async () =>
    drawFlameGraph(flame, parseFolded(await api.selectionFolded(selection)), "samples"),
  );
}

// The function whose spread is shown first: one with a deviating board, else the busiest.
function defaultFunction(spread: Spread | undefined): string {
  if (!spread) return "";
  return (
    (spread.functions.find((f) => f.boards.some((b) => b.outside)) ?? spread.functions[0])?.name ??
    ""
  );
}

const withParam = (params: URLSearchParams, key: string, value: string) => {
  const q = new URLSearchParams(params);
  q.set(key, value);
  return `/fleet?${q}`;
};

function buildTable(builds: Build[], current: string) {
  if (!builds.length) return null;
  return h(
    "table",
    { class: "data compact", id: "builds" },
    h("caption", {}, "Builds of the stored sessions"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...["Build-id", "Arch", "Sessions", "Boards", ""].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h(
      "tbody",
      {},
      builds.map((b) =>
        h(
          "tr",
          { "data-build": b.build_id, class: b.build_id === current ? "selected" : undefined },
          h("th", { scope: "row", class: "mono", title: b.build_id }, shortId(b.build_id)),
          h("td", {}, b.arch || "—"),
          h("td", { class: "num" }, count(b.sessions.length)),
          h("td", {}, `${b.boards.length}: ${b.boards.join(", ")}`),
          h(
            "td",
            {},
            b.build_id === current
              ? h("span", { class: "muted" }, "shown")
              : link(`/fleet?build_id=${b.build_id}`, "show"),
          ),
        ),
      ),
    ),
  );
}

// Narrow the build to some of its boards, or to boards with a tag.
function selectionForm(build: Build, boards: string[], tags: string[]) {
  return form(
    { class: "filters", id: "fleet-form" },
    (data) => {
      const picked = data.getAll("board").map(String);
      const tag = list(formText(data, "tag"));
      navigate(
        `/fleet?${buildSelection(build.build_id, picked.length === build.boards.length ? [] : picked, tag)}`,
      );
    },
    h(
      "fieldset",
      { class: "boards" },
      h("legend", {}, "Boards"),
      build.boards.map((b) =>
        h(
          "label",
          {},
          h("input", {
            type: "checkbox",
            name: "board",
            value: b,
            checked: !boards.length || boards.includes(b),
          }),
          " ",
          b,
        ),
      ),
    ),
    h(
      "label",
      {},
      "Tags ",
      h("input", { name: "tag", value: tags.join(","), size: 14, placeholder: "any" }),
    ),
    h("button", { type: "submit" }, "Merge"),
  );
}

function spreadSection(profile: SelectionProfile, fn: string, params: URLSearchParams) {
  const spread = profile.spread;
  const title = "Per-board spread";
  if (!spread)
    return section(
      "h-spread",
      title,
      h(
        "p",
        { class: "muted", id: "spread-missing" },
        "This daemon does not compute the per-board spread yet.",
      ),
    );
  const f = spread.functions.find((x) => x.name === fn) ?? spread.functions[0];
  const deviating = spread.functions.flatMap((x) =>
    x.boards.filter((b) => b.outside).map((b) => ({ fn: x, board: b })),
  );
  return section(
    "h-spread",
    title,
    h(
      "p",
      {
        class: deviating.length ? "notice warn" : "muted",
        id: "deviating",
        role: deviating.length ? "status" : undefined,
      },
      deviating.length
        ? [
            `${deviating.length} board × function share${deviating.length > 1 ? "s" : ""} outside the fleet: `,
            deviating.map((d, i) => [
              i ? "; " : "",
              link(withParam(params, "function", d.fn.name), `${d.board.board} in ${d.fn.name}`),
              ` ${percent(d.board.percent)} vs ${percent(d.fn.fleet_percent)}`,
            ]),
          ]
        : "No board's share of any function differs from the typical board's beyond sampling error.",
    ),
    form(
      { class: "filters" },
      () => undefined, // the picker navigates by itself
      h(
        "label",
        {},
        "Function ",
        h(
          "select",
          {
            id: "spread-function",
            onchange: (e: Event) =>
              navigate(withParam(params, "function", (e.target as HTMLSelectElement).value)),
          },
          spread.functions.map((x) =>
            h(
              "option",
              { value: x.name, selected: x === f },
              `${x.name}${x.boards.some((b) => b.outside) ? " (deviating boards)" : ""}`,
            ),
          ),
        ),
      ),
    ),
    f
      ? h(
          "div",
          { class: "grid spread-pair" },
          spreadPlot(f),
          spreadTable(f, (board) => againstTheRest(profile, board)),
        )
      : h("p", { class: "muted" }, "No function has samples."),
    h(
      "p",
      { class: "muted small" },
      `Intervals: ${spread.interval}. Test: ${spread.test}.`,
      spread.functions_omitted
        ? ` The spread covers the ${spread.functions.length} busiest functions; ${count(spread.functions_omitted)} more are left out (the API's spread_top= asks for more).`
        : "",
    ),
  );
}

const svgNs = "http://www.w3.org/2000/svg";
function svg(tag: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const el = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// One row per board: its share (dot) and interval (bar); the fleet's share as a line in its
// interval's band. Deviating boards in red.
function spreadPlot(f: SpreadFunction): SVGElement {
  const row = 24;
  const left = 120;
  const width = 560;
  const top = 28;
  const height = top + f.boards.length * row + 30;
  // The axis spans the intervals (not from 0: shares of 81 % and 93 % would crowd at one end).
  const top0 = Math.max(f.fleet_interval[1], ...f.boards.map((b) => b.interval[1]));
  const bottom0 = Math.min(f.fleet_interval[0], ...f.boards.map((b) => b.interval[0]));
  const step = niceStep(Math.max(top0 - bottom0, 0.01) / 4);
  const lo = Math.max(0, Math.floor(bottom0 / step) * step - step / 2);
  const hi = Math.min(100, Math.ceil(top0 / step) * step + step / 2);
  const x = (p: number) => left + ((p - lo) / (hi - lo || 1)) * (width - left - 28);
  const plot = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    id: "spread-plot",
    "aria-label": `share of ${f.name} per board`,
  });
  plot.append(
    svg(
      "text",
      { x: left, y: 16, class: "axis-title" },
      `${f.name}: self % per board (95 % interval)`,
    ),
  );
  plot.append(
    svg("rect", {
      x: x(f.fleet_interval[0]),
      y: top - 4,
      width: Math.max(1, x(f.fleet_interval[1]) - x(f.fleet_interval[0])),
      height: f.boards.length * row + 4,
      class: "fleet-band",
    }),
  );
  plot.append(
    svg("line", {
      x1: x(f.fleet_percent),
      x2: x(f.fleet_percent),
      y1: top - 4,
      y2: top + f.boards.length * row,
      class: "fleet-line",
    }),
  );
  f.boards.forEach((b, i) => {
    const y = top + i * row + row / 2;
    const g = svg("g", { class: b.outside ? "board outside" : "board", "data-board": b.board });
    g.append(svg("text", { x: left - 8, y: y + 4, "text-anchor": "end" }, b.board));
    g.append(
      svg("line", { x1: x(b.interval[0]), x2: x(b.interval[1]), y1: y, y2: y, class: "interval" }),
    );
    g.append(svg("circle", { cx: x(b.percent), cy: y, r: 4.5 }));
    g.append(
      svg(
        "title",
        {},
        `${b.board}: ${percent(b.percent)} [${percent(b.interval[0])}, ${percent(b.interval[1])}], p = ${b.p_value.toExponential(2)}${b.outside ? ", outside the fleet" : ""}`,
      ),
    );
    plot.append(g);
  });
  const axisY = top + f.boards.length * row + 8;
  for (let p = Math.ceil(lo / step) * step; p <= hi + 1e-9; p += step) {
    plot.append(svg("line", { x1: x(p), x2: x(p), y1: axisY - 4, y2: axisY, class: "tick" }));
    plot.append(
      svg(
        "text",
        { x: x(p), y: axisY + 14, "text-anchor": "middle", class: "tick-label" },
        `${Number(p.toFixed(6))} %`,
      ),
    );
  }
  return plot;
}

// 1, 2 or 5 times a power of ten, at least `raw`.
function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
}

// The Diff of the rest of the fleet (A) against one board (B), both of this build and tags.
function againstTheRest(profile: SelectionProfile, board: string): string | null {
  const build = profile.selection.build_id;
  const rest = profile.selection.boards.filter((b) => b !== board);
  if (!build || !rest.length) return null;
  return `/diff?${new URLSearchParams({ a: buildSelection(build, rest), b: buildSelection(build, [board]) })}`;
}

function spreadTable(f: SpreadFunction, diffOf: (board: string) => string | null) {
  return h(
    "div",
    {},
    h(
      "p",
      { class: "meta" },
      `Fleet: ${percent(f.fleet_percent)} [${percent(f.fleet_interval[0])}, ${percent(f.fleet_interval[1])}] · boards from ${percent(f.min_percent)} to ${percent(f.max_percent)}, mean ${percent(f.mean_percent)}`,
    ),
    h(
      "table",
      { class: "data", id: "spread-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Board", "Samples", "Self %", "95 % interval", "p-value", ""].map((t, i) =>
            h("th", { scope: "col", class: i && i < 5 ? "num" : "" }, t),
          ),
        ),
      ),
      h(
        "tbody",
        {},
        f.boards.map((b) =>
          h(
            "tr",
            { "data-board": b.board, class: b.outside ? "outside" : undefined },
            h("th", { scope: "row" }, b.board),
            h("td", { class: "num" }, count(b.samples)),
            h("td", { class: "num" }, percent(b.percent)),
            h("td", { class: "num" }, `${b.interval[0].toFixed(2)} – ${b.interval[1].toFixed(2)}`),
            h("td", { class: "num" }, pValue(b.p_value)),
            h(
              "td",
              {},
              b.outside
                ? [
                    h("span", { class: "pill bad" }, "outside"),
                    " ",
                    diffOf(b.board)
                      ? link(diffOf(b.board) as string, "diff vs the rest", { class: "diff-board" })
                      : "",
                  ]
                : "",
            ),
          ),
        ),
      ),
    ),
  );
}

// A p-value as the table shows it; 0 is an underflow of the double the daemon computed.
export const pValue = (p: number) =>
  p === 0 ? "< 1e-300" : p < 1e-4 ? p.toExponential(1) : p.toFixed(4);

function flatTable(profile: SelectionProfile, params: URLSearchParams) {
  const outside = new Map(
    (profile.spread?.functions ?? []).map((f) => [
      f.name,
      f.boards.filter((b) => b.outside).map((b) => b.board),
    ]),
  );
  return h(
    "table",
    { class: "data", id: "fleet-flat" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...["Function", "Self %", "Self s", "Running sum s", "Calls", "Deviating boards"].map(
          (t, i) => h("th", { scope: "col", class: i && i < 5 ? "num" : "" }, t),
        ),
      ),
    ),
    h(
      "tbody",
      {},
      profile.flat.map((r) =>
        h(
          "tr",
          { "data-function": r.name },
          h(
            "th",
            { scope: "row", class: "mono" },
            outside.has(r.name) ? link(withParam(params, "function", r.name), r.name) : r.name,
          ),
          h("td", { class: "num" }, percent(r.percent)),
          h("td", { class: "num" }, seconds(r.self_seconds)),
          h("td", { class: "num" }, seconds(r.cumulative_seconds)),
          h("td", { class: "num" }, count(r.calls)),
          h(
            "td",
            { class: (outside.get(r.name) ?? []).length ? "warn" : "muted" },
            (outside.get(r.name) ?? []).join(", ") || "—",
          ),
        ),
      ),
    ),
  );
}
