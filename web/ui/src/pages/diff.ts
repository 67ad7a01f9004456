// Diff: two selections (a session, a build, a build's boards or tags) compared by the daemon
// (GET /api/v1/diff): per function the change of self and total time and of calls, the test's
// p-value and its verdict (slower, faster), and b's stacks drawn coloured by their change.
import { api, ApiError, type Diff, type DiffFunction, type Session } from "../api";
import { count, isOverhead, plusMinus } from "../format";
import { alertText, form, formText, h, link, replace, section } from "../dom";
import { sortedBy, sortHeaders, type Sort } from "../sort";
import { navigate } from "../router";
import { buildsOf, selectionPicker, shortId } from "../selection";
import { differential, drawFlameGraph, drawStacks, flameBox, parseFolded } from "../flamegraph";
import { pValue } from "./fleet";

// A Compare URL (/compare?a=3&b=4, session ids) opens this page.
export function compareRedirect(params: URLSearchParams): string {
  const q = new URLSearchParams();
  for (const side of ["a", "b"]) {
    const id = params.get(side);
    if (id && /^\d+$/.test(id)) q.set(side, `session=${id}`);
  }
  return `/diff${q.size ? `?${q}` : ""}`;
}

export async function diffPage(main: HTMLElement, params: URLSearchParams) {
  const a = params.get("a")?.trim() ?? "";
  const b = params.get("b")?.trim() ?? "";
  const sessions = await api.sessions();
  const picker = diffForm(sessions, a, b);
  if (!a || !b) {
    replace(
      main,
      h("h1", {}, "Diff"),
      h(
        "p",
        { class: "muted" },
        "Two selections compared function by function: a session, a build (all its sessions), or a build narrowed to boards or tags. The daemon tests each change; significant ones are marked slower or faster.",
      ),
      picker,
    );
    return;
  }
  const byName = params.get("merge") === "by_name";
  let diff: Diff;
  try {
    diff = await api.diff(a, b, byName);
  } catch (e) {
    // Two builds: refused with both build-ids; comparing them by name is the user's call.
    const otherBuild = e instanceof ApiError && e.code === "conflict" && !byName;
    replace(
      main,
      h("h1", {}, "Diff"),
      picker,
      alertText((e as Error).message),
      otherBuild
        ? h(
            "p",
            {},
            link(
              `/diff?${new URLSearchParams({ a, b, merge: "by_name" })}`,
              "Compare them with functions matched by name",
              { id: "compare-by-name" },
            ),
            " (a function of the same name in another build may be other code).",
          )
        : "",
    );
    return;
  }
  const flame = flameBox("diff-flame-graph");
  replace(
    main,
    h("h1", {}, "Diff"),
    picker,
    h(
      "p",
      { class: "meta", id: "diff-sides" },
      "A: ",
      sideText(diff.a, a),
      h("br"),
      "B: ",
      sideText(diff.b, b),
    ),
    buildNote(diff),
    h("p", { class: "muted small" }, methodText(diff)),
    section(
      "h-diff-table",
      "Functions",
      // Self and total seconds are each side's own; the changes compare them normalized.
      h(
        "p",
        { class: "meta" },
        diff.normalization === "per call"
          ? `Changes are per call of the whole program (A made ${count(diff.a.total_calls)} calls, B ${count(diff.b.total_calls)}), so a longer run is not slower by itself.`
          : `Changes are per sample (A has ${count(diff.a.total_samples)} samples, B ${count(diff.b.total_samples)}).`,
      ),
      diffTable(diff.functions),
    ),
    section(
      "h-diff-flame",
      "Differential flame graph (B's stacks, coloured by their change from A)",
      flame,
    ),
  );
  await drawStacks(flame, async () => {
    const [fa, fb] = await Promise.all([api.selectionFolded(a), api.selectionFolded(b)]);
    const { tree, missing, largest } = differential(parseFolded(fa), parseFolded(fb));
    drawFlameGraph(flame, tree, "samples", largest);
    if (missing > 0.0005)
      flame.append(
        h(
          "p",
          { class: "muted" },
          `${(missing * 100).toFixed(2)} % of A's time is in stacks B does not have (not drawn).`,
        ),
      );
  });
}

function sideText(side: Diff["a"], selection: string) {
  const s = side.selection;
  const one = s.sessions.length === 1;
  return [
    h("code", {}, selection),
    ` — ${one ? "" : `${s.sessions.length} sessions, `}`,
    one ? link(`/sessions/${s.sessions[0]}`, `session ${s.sessions[0]}`) : "",
    ` on ${s.boards.join(", ")} · build ${shortId(s.build_id)} · ${count(side.total_samples)} samples, ${count(side.total_calls)} calls`,
  ];
}

// Functions of the same name in different builds may not be the same code: said first.
function buildNote(diff: Diff) {
  const a = diff.a.selection.build_id;
  const b = diff.b.selection.build_id;
  if (a && b && a !== b)
    return h(
      "p",
      { class: "notice warn", role: "alert", id: "firmware-warning" },
      `Different firmware (build-id ${shortId(a)} vs ${shortId(b)}): functions of the same name may be different code.`,
    );
  if (!a || !b)
    return h(
      "p",
      { class: "muted", id: "firmware-note" },
      "Whether both ran the same firmware is unknown (no build-id on one side).",
    );
  return h("p", { class: "muted", id: "firmware-note" }, `Both sides ran build ${shortId(a)}.`);
}

// The two selection fields, each with a picker (a session, or a whole build).
export function diffForm(sessions: Session[], a = "", b = "") {
  const builds = buildsOf(sessions);
  const field = (name: "a" | "b", value: string) => {
    const input = h("input", {
      name,
      id: `diff-${name}`,
      value,
      size: 32,
      required: true,
      placeholder: "session=3 or build_id=…&tag=…",
      class: "mono",
      "aria-label": `Selection ${name.toUpperCase()}`,
    }) as HTMLInputElement;
    return h(
      "label",
      { class: "side" },
      h("span", { class: "side-name" }, name.toUpperCase()),
      input,
      selectionPicker(input, sessions, builds),
    );
  };
  return form(
    { class: "filters", id: "diff-form" },
    (data) =>
      navigate(
        `/diff?${new URLSearchParams({ a: formText(data, "a").trim(), b: formText(data, "b").trim() })}`,
      ),
    field("a", a),
    field("b", b),
    h("button", { type: "submit" }, "Diff"),
  );
}

type Column = {
  key: string;
  label: string;
  value: (f: DiffFunction) => number | string | null;
  show: (f: DiffFunction) => string;
  numeric: boolean;
};

// How the sides were compared, said once: the test's description names the normalization, the
// test and its alpha (its name and the normalization field repeat parts of it).
export const methodText = (diff: Pick<Diff, "test">): string => `Method: ${diff.test.description}.`;

// A relative change as the table shows it. The diff gives null when A has none of the
// quantity: that is "new" only when B has some; with none on either side nothing changed ("—").
export const changeText = (change: number | null, a: number, b: number): string => {
  if (change !== null) {
    const sign = change > 0 ? "+" : change < 0 ? "−" : "±";
    return `${sign}${Math.abs(change * 100).toFixed(1)} %`;
  }
  return a === 0 && b > 0 ? "new" : "—";
};
const secs = (s: number) => s.toFixed(2);
// A side's share with its sampling error: "12.34 ±0.56" (the 95 % Wilson interval's half width).
const share = (side: DiffFunction["a"]) =>
  `${side.self_percent.toFixed(2)} ${plusMinus(side.self_percent_interval)}`;

const columns: Column[] = [
  { key: "name", label: "Function", value: (f) => f.name, show: (f) => f.name, numeric: false },
  {
    key: "a_self",
    label: "A self s",
    value: (f) => f.a.self_seconds,
    show: (f) => secs(f.a.self_seconds),
    numeric: true,
  },
  {
    key: "b_self",
    label: "B self s",
    value: (f) => f.b.self_seconds,
    show: (f) => secs(f.b.self_seconds),
    numeric: true,
  },
  {
    key: "a_share",
    label: "A self % ± (95 %)",
    value: (f) => f.a.self_percent,
    show: (f) => share(f.a),
    numeric: true,
  },
  {
    key: "b_share",
    label: "B self % ± (95 %)",
    value: (f) => f.b.self_percent,
    show: (f) => share(f.b),
    numeric: true,
  },
  {
    key: "self_change",
    label: "Self change",
    value: (f) => f.self_change,
    show: (f) => changeText(f.self_change, f.a.self_seconds, f.b.self_seconds),
    numeric: true,
  },
  {
    key: "delta",
    label: "Self % Δ",
    value: (f) => f.self_percent_delta,
    show: (f) =>
      `${f.self_percent_delta >= 0 ? "+" : "−"}${Math.abs(f.self_percent_delta).toFixed(2)}`,
    numeric: true,
  },
  {
    key: "total_change",
    label: "Total change",
    value: (f) => f.total_change,
    show: (f) => changeText(f.total_change, f.a.total_seconds, f.b.total_seconds),
    numeric: true,
  },
  {
    key: "a_calls",
    label: "A calls",
    value: (f) => f.a.calls,
    show: (f) => count(f.a.calls),
    numeric: true,
  },
  {
    key: "b_calls",
    label: "B calls",
    value: (f) => f.b.calls,
    show: (f) => count(f.b.calls),
    numeric: true,
  },
  {
    key: "calls_change",
    label: "Calls change",
    value: (f) => f.calls_change,
    show: (f) => changeText(f.calls_change, f.a.calls, f.b.calls),
    numeric: true,
  },
  {
    key: "p_value",
    label: "p-value",
    value: (f) => f.p_value,
    show: (f) => pValue(f.p_value),
    numeric: true,
  },
  {
    key: "change",
    label: "Verdict",
    value: (f) => ({ slower: 2, none: 1, faster: 0 })[f.change],
    show: (f) => (f.change === "none" ? "—" : f.change),
    numeric: true,
  },
];

// Sortable by any column; the daemon's order (significant first, then by the size of the
// change) until a header is clicked.
function diffTable(functions: DiffFunction[]) {
  const head = h("tr");
  const body = h("tbody");
  let sort: Sort<string> | null = null;
  const render = () => {
    const col = columns.find((c) => c.key === sort?.key);
    const rows = col ? sortedBy(functions, col.value, sort?.descending ?? false) : functions;
    replace(
      head,
      sortHeaders(columns, sort, (s) => {
        sort = s;
        render();
      }),
    );
    replace(
      body,
      rows.map((f) =>
        h(
          "tr",
          {
            "data-function": f.name,
            "data-change": f.change,
            class:
              [f.change !== "none" ? f.change : "", isOverhead(f.name) ? "overhead" : ""]
                .join(" ")
                .trim() || undefined,
          },
          columns.map((c, i) =>
            i === 0
              ? h(
                  "th",
                  { scope: "row", class: "mono" },
                  f.name,
                  isOverhead(f.name) ? h("span", { class: "tag" }, "overhead") : "",
                )
              : h(
                  "td",
                  {
                    class: `num${c.key === "change" && f.change !== "none" ? " verdict" : ""}`,
                    "data-col": c.key,
                  },
                  c.key === "change" && f.change !== "none"
                    ? h("span", { class: `pill ${f.change}` }, c.show(f))
                    : c.show(f),
                ),
          ),
        ),
      ),
      rows.length
        ? null
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns.length, class: "muted" },
              "Neither side has a function with samples or calls.",
            ),
          ),
    );
  };
  render();
  return h(
    "div",
    { class: "scroll tall" },
    h("table", { class: "data", id: "diff-table" }, h("thead", {}, head), body),
  );
}
