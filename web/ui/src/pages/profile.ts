// Profile of one session: the flat profile (sortable, searchable), the call graph drawn with
// caller/callee navigation, and the call-graph table laid out as gprof prints it.
import {
  api,
  ApiError,
  downloads,
  exportFormats,
  selectionDownloads,
  kGraphEntries,
  rawExports,
  taskExports,
  type AttributedArc,
  type FlatRow,
  type GraphEntry,
  type GraphLine,
  type Annotation,
  type Profile,
  type Tasks,
  type Window,
} from "../api";
import { sourceView } from "../source";
import {
  count,
  duration,
  intervalTitle,
  isOverhead,
  percent,
  plusMinus,
  seconds,
  time,
} from "../format";
import {
  alertText,
  attempt,
  downloadLinks,
  form,
  formText,
  h,
  link,
  replace,
  section,
} from "../dom";
import { sortedBy, sortHeaders, type Sort } from "../sort";
import {
  callGraphDot,
  gprofCalled,
  gprofLineCells,
  gprofName,
  printfFixed,
  renderCallGraph,
  withinCycle,
} from "../callgraph";
import { navigate } from "../router";
import { drawFlameGraph, drawStacks, flameBox, parseFolded } from "../flamegraph";
import { panZoom, type PanZoom } from "../panzoom";
import {
  hasTasks,
  interruptsTable,
  isCapture,
  taskPicker,
  tasksTable,
  timelineView,
} from "./tasks";

// A column of the flat table: any field of a row but the interval in seconds and the source
// line (not shown).
type Key = Exclude<keyof FlatRow, "self_seconds_interval" | "source">;
const isMeasured = (format: string) => format.startsWith("cct-");
const columns: { key: Key; label: string; numeric: boolean; title?: string }[] = [
  { key: "name", label: "Function", numeric: false },
  { key: "percent", label: "Self %", numeric: true },
  { key: "self_percent_interval", label: "± (95 %)", numeric: true },
  { key: "self_seconds", label: "Self s", numeric: true },
  {
    key: "total_seconds",
    label: "Total s",
    numeric: true,
    title: "Inclusive time: self + children, as the call graph has it",
  },
  {
    key: "cumulative_seconds",
    label: "Running sum s",
    numeric: true,
    title: "gprof's “cumulative seconds”: self time summed down the table, not inclusive time",
  },
  { key: "calls", label: "Calls", numeric: true },
  { key: "self_ms_per_call", label: "Self ms/call", numeric: true },
  { key: "total_ms_per_call", label: "Total ms/call", numeric: true },
];

// The sampling error's column sorts by the interval's width.
const sortValue = (r: FlatRow, key: Key) =>
  key === "self_percent_interval"
    ? r.self_percent_interval
      ? r.self_percent_interval[1] - r.self_percent_interval[0]
      : null
    : r[key];

export async function profilePage(main: HTMLElement, _params: URLSearchParams, id?: number) {
  const sid = id as number;
  // ?sync_reference=ID: the synchronisation alarm against that session (the dithered run).
  const syncText = _params.get("sync_reference");
  const syncReference = syncText && /^\d+$/.test(syncText) ? Number(syncText) : undefined;
  // ?graph_top=N: the call graph's N busiest entries on the page (the table's "more" link).
  // ?last=S: the profile of the session's last S seconds (of its records' receive times).
  const lastText = _params.get("last");
  const last = lastText && /^[1-9]\d{0,6}$/.test(lastText) ? Number(lastText) : undefined;
  const topText = _params.get("graph_top");
  const graphTop = topText && /^[1-9]\d{0,6}$/.test(topText) ? Number(topText) : kGraphEntries;
  // ?task=NAME: the profile of what ran in that RTOS task (the selection session=ID&task=NAME),
  // of the whole session (a task's profile has no time window).
  const task = _params.get("task") || undefined;
  const taskSelection = task && new URLSearchParams({ session: String(sid), task }).toString();
  const [session, formats] = await Promise.all([api.session(sid), exportFormats()]);
  // Only a capture's raw bytes have tasks, interrupts and a timeline (not an imported gmon.out
  // or Tiva report, nor raw data retention pruned).
  const decodable = !session.raw_pruned && isCapture(session.format);
  // The tasks, asked for beside the profile: the picker and the share table wait for them.
  const tasksAsked: Promise<Tasks | undefined> = decodable
    ? api.tasks(sid).catch(() => undefined)
    : Promise.resolve(undefined);
  // The measured calling-context exports are offered once the session is known to have a tree.
  // Raw bytes and records pruned by retention: their exports are gone (410), so not offered;
  // nor those of tasks and time where there are no bytes to decode.
  const offered = formats.session.filter(
    (f) =>
      !(session.raw_pruned && rawExports.includes(f)) && (decodable || !taskExports.includes(f)),
  );
  const downloadLine = h(
    "p",
    { class: "meta downloads" },
    "download ",
    downloadLinks(
      taskSelection
        ? selectionDownloads(
            taskSelection,
            formats.selection.filter((f) => !isMeasured(f) && !taskExports.includes(f)),
          )
        : downloads(
            sid,
            offered.filter((f) => !isMeasured(f)),
          ),
    ),
    session.raw_pruned
      ? h("span", { class: "muted", id: "raw-pruned" }, ` · ${session.raw_pruned.reason}`)
      : "",
  );
  const header = [
    h("h1", {}, `Profile: ${session.board} · session ${sid}${task ? ` · task ${task}` : ""}`),
    h(
      "p",
      { class: "meta" },
      `${session.state} · started ${time(session.started_ns)} · ${duration(session.started_ns, session.ended_ns)} · `,
      session.state === "capturing" ? [link(`/live/${sid}`, "live view"), " · "] : "",
      link(`/diff?${new URLSearchParams({ a: `session=${sid}` })}`, "compare with…", {
        id: "compare-with",
      }),
      session.build_id
        ? [
            " · ",
            link(`/fleet?build_id=${session.build_id}`, "its build's fleet", {
              id: "fleet-of-build",
            }),
          ]
        : "",
    ),
    downloadLine,
  ];
  const timeWindow: Window =
    last === undefined || task ? {} : { from: (session.ended_ns ?? Date.now() * 1e6) - last * 1e9 };
  // The task picker joins the window's line once the tasks are known (a session has some).
  const windowLine = windowForm(_params, task ? undefined : last);
  header.push(windowLine);
  const chooseTask = (name: string) => {
    const query = new URLSearchParams(_params);
    query.delete("last");
    if (name) query.set("task", name);
    else query.delete("task");
    navigate(`${location.pathname}${query.size ? `?${query}` : ""}`);
  };
  void tasksAsked.then((tasks) => {
    if (tasks && hasTasks(tasks))
      windowLine.append(" · ", h("span", { id: "task-line" }, taskPicker(tasks, task, chooseTask)));
  });
  let profile: Profile;
  try {
    profile = taskSelection
      ? await api
          .selectionProfile(taskSelection, graphTop)
          .then((p): Profile => ({ ...p, sleeping: null, wrong_elf: null }))
      : await api.profile(sid, syncReference, graphTop, timeWindow);
  } catch (e) {
    const noElf = e instanceof ApiError && e.code === "no_elf";
    replace(
      main,
      ...header,
      alertText((e as Error).message),
      noElf ? attachForm(sid, () => profilePage(main, _params, id)) : null,
    );
    return;
  }

  const entries = new Map<string, GraphEntry | undefined>(
    profile.call_graph.map((e) => [e.name, e]),
  );
  const search = h("input", {
    type: "search",
    id: "search",
    placeholder: "Filter functions",
    "aria-label": "Filter functions",
  }) as HTMLInputElement;
  const flatBody = h("tbody");
  const headRow = h("tr");
  const focus = h("section", { class: "focus", "aria-live": "polite", id: "focus" });
  const graph = h(
    "div",
    { class: "graph", id: "call-graph" },
    h("p", { class: "muted" }, "Laying out the call graph…"),
  );
  let view: PanZoom | undefined; // the drawn graph's pan and zoom
  let sort: Sort<Key> = { key: "percent", descending: true };
  let selected = profile.flat[0]?.name;

  const renderFlat = () => {
    const needle = search.value.trim().toLowerCase();
    const rows = sortedBy(
      profile.flat.filter((r) => r.name.toLowerCase().includes(needle)),
      (r) => sortValue(r, sort.key),
      sort.descending,
    );
    replace(
      headRow,
      sortHeaders(columns, sort, (s) => {
        sort = s;
        renderFlat();
      }),
    );
    replace(
      flatBody,
      rows.map((r) =>
        h(
          "tr",
          {
            class:
              [isOverhead(r.name) ? "overhead" : "", r.name === selected ? "selected" : ""]
                .join(" ")
                .trim() || undefined,
          },
          h(
            "th",
            { scope: "row", class: "mono" },
            h("button", { type: "button", class: "fn", onclick: () => select(r.name) }, r.name),
            isOverhead(r.name)
              ? h("span", { class: "tag", title: "time spent in the profiler itself" }, "overhead")
              : "",
          ),
          h("td", { class: "num" }, percent(r.percent)),
          h(
            "td",
            { class: "num interval", title: intervalTitle(r.self_percent_interval, "%") },
            plusMinus(r.self_percent_interval),
          ),
          h(
            "td",
            { class: "num", title: intervalTitle(r.self_seconds_interval, "s") },
            seconds(r.self_seconds),
          ),
          h("td", { class: "num" }, seconds(r.total_seconds)),
          h("td", { class: "num" }, seconds(r.cumulative_seconds)),
          h("td", { class: "num" }, count(r.calls)),
          h(
            "td",
            { class: "num" },
            r.self_ms_per_call === null ? "—" : r.self_ms_per_call.toFixed(2),
          ),
          h(
            "td",
            { class: "num" },
            r.total_ms_per_call === null ? "—" : r.total_ms_per_call.toFixed(2),
          ),
        ),
      ),
      rows.length
        ? null
        : h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, "No function matches.")),
    );
  };

  // The page has the busiest entries; any other function's is asked for when it is selected.
  let focusAsked = 0;
  const renderFocus = async () => {
    const asked = ++focusAsked;
    const name = selected;
    if (name && !entries.has(name)) {
      replace(focus, h("p", { class: "muted" }, `Loading the callers and callees of ${name}…`));
      try {
        const found = taskSelection
          ? await api.selectionGraphEntries(taskSelection, name)
          : await api.graphEntries(sid, name, timeWindow);
        for (const e of found) entries.set(e.name, e);
        if (!entries.has(name)) entries.set(name, undefined); // no entry: no calls and no time
      } catch (err) {
        if (asked === focusAsked)
          replace(
            focus,
            alertText(
              `The callers and callees of ${name} could not be loaded: ${(err as Error).message}`,
            ),
          );
        return;
      }
      if (asked !== focusAsked) return; // another function was selected meanwhile
    }
    const e = name ? entries.get(name) : undefined;
    if (!e)
      return replace(
        focus,
        h(
          "p",
          { class: "muted" },
          name
            ? `${name} has no call-graph entry (no calls and no time).`
            : "Select a function to see its callers and callees.",
        ),
      );
    const list = (lines: GraphLine[], empty: string) =>
      lines.length
        ? h(
            "ul",
            {},
            lines.map((l) =>
              h(
                "li",
                {},
                h("button", { type: "button", class: "fn", onclick: () => select(l.name) }, l.name),
                withinCycle(e, l)
                  ? ` ${count(l.count)} calls ${l.index === e.index ? "of itself" : `within cycle ${l.cycle}`}`
                  : ` ${count(l.count)}/${count(l.of)} calls`,
              ),
            ),
          )
        : h("p", { class: "muted" }, empty);
    replace(
      focus,
      h("h3", {}, e.name, isOverhead(e.name) ? h("span", { class: "tag" }, "overhead") : ""),
      h(
        "p",
        {},
        `${percent(e.percent)} of the time with callees · self ${seconds(e.self_seconds)} s · children ${seconds(e.children_seconds)} s · called ${count(e.called)}${e.self_calls ? "+" + count(e.self_calls) : ""}`,
      ),
      h(
        "div",
        { class: "pair" },
        h(
          "div",
          {},
          h("h4", {}, "Callers"),
          list(e.parents ?? [], e.spontaneous ? "spontaneous" : "none"),
        ),
        h("div", {}, h("h4", {}, "Callees"), list(e.children ?? [], "none")),
      ),
    );
  };

  const renderGraph = async () => {
    try {
      const svg = await renderCallGraph(
        callGraphDot(profile.call_graph, profile.total_seconds, selected, {
          focus: graphFocus.value,
          ignore: graphIgnore.value,
          hide: graphHide.value,
        }),
      );
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", "call graph (wheel to zoom, drag to pan)");
      for (const node of svg.querySelectorAll<SVGGElement>("g.node")) {
        const name = node.querySelector("title")?.textContent ?? "";
        node.addEventListener("click", () => select(name));
      }
      replace(graph, svg);
      view = panZoom(svg);
    } catch (e) {
      replace(graph, alertText(`The call graph could not be drawn: ${(e as Error).message}`));
    }
  };

  const flame = flameBox("flame-graph");
  const renderFlame = () =>
    drawStacks(flame, async () =>
      drawFlameGraph(
        flame,
        parseFolded(
          await (taskSelection
            ? api.selectionFolded(taskSelection)
            : api.sessionFolded(sid, timeWindow)),
        ),
        "samples",
        undefined,
        (name) => profile.flat.some((r) => r.name === name) && select(name),
      ),
    );

  // The measured calling contexts, where the session has them (entry/exit events): an icicle in
  // cycles and each arc's measured time beside gprof's estimate. Without them, a note says the
  // flame graph above is the estimate.
  const measured = h(
    "div",
    { class: "flame", id: "cct-flame-graph" },
    h("p", { class: "muted" }, "Loading the measured calling contexts…"),
  );
  const arcs = h("div", { id: "cct-arcs" });
  const renderMeasured = async () => {
    if (!session.calling_context_nodes) {
      replace(
        measured,
        h(
          "p",
          { class: "muted", id: "cct-none" },
          "No calling-context tree: this session has no function entry/exit events, so the flame graph above (gprof's estimate) is all there is.",
        ),
      );
      return;
    }
    try {
      const [folded, c] = await Promise.all([api.sessionCctFolded(sid), api.sessionCct(sid)]);
      const sampled = c.unit === "samples";
      if (sampled) measuredTitle.textContent = sampledTitle;
      drawFlameGraph(measured, parseFolded(folded), c.unit);
      if (!taskSelection)
        replace(downloadLine, "download ", downloadLinks(downloads(sid, offered)));
      if (c.incomplete_nodes > 0)
        measured.append(
          h(
            "p",
            { class: "muted", id: "cct-incomplete" },
            sampled
              ? `${c.incomplete_nodes} of ${c.nodes} paths are marked [incomplete]: their stacks could not be unwound to the reset handler (stack_unwind_failures).`
              : `${c.incomplete_nodes} of ${c.nodes} paths are marked [incomplete]: events were lost or a function had not returned when the capture ended.`,
          ),
        );
      replace(arcs, sampled ? sampledArcsTable(c.arcs) : attributedArcsTable(c.arcs));
    } catch (e) {
      replace(
        measured,
        alertText(`The measured calling contexts could not be loaded: ${(e as Error).message}`),
      );
    }
  };

  // The selected function's source lines (and instructions) with their samples.
  const source = h("div", { id: "source-view", "aria-live": "polite" });
  const disasm = h("input", { type: "checkbox", id: "disasm" }) as HTMLInputElement;
  const sourceSearch = h("input", {
    type: "search",
    id: "source-search",
    placeholder: "Search the source",
    "aria-label": "Search the source and instructions",
  }) as HTMLInputElement;
  let sourceAsked = 0;
  let annotation: { key: string; value: Annotation } | undefined;
  const renderSource = async () => {
    const asked = ++sourceAsked;
    const name = selected;
    if (!name) return replace(source, h("p", { class: "muted" }, "Select a function."));
    const key = `${name}\n${disasm.checked}`;
    if (annotation?.key !== key) {
      replace(source, h("p", { class: "muted" }, `Loading the source of ${name}…`));
      try {
        const value = await api.annotation(sid, name, disasm.checked, timeWindow);
        if (asked !== sourceAsked) return;
        annotation = { key, value };
      } catch (err) {
        if (asked === sourceAsked)
          replace(
            source,
            alertText(`The source of ${name} could not be loaded: ${(err as Error).message}`),
          );
        return;
      }
    }
    replace(source, sourceView(annotation.value, disasm.checked, sourceSearch.value));
  };
  disasm.addEventListener("change", () => void renderSource());
  sourceSearch.addEventListener("input", () => void renderSource());
  const sourceSection = section(
    "h-source",
    "Source (samples per line; the selected function)",
    h("div", { class: "graph-tools" }, sourceSearch, " ", h("label", {}, disasm, " disassembly")),
    source,
  );

  const select = (name: string) => {
    selected = name;
    renderFlat();
    void renderFocus();
    void renderGraph();
    void renderSource();
  };

  search.addEventListener("input", renderFlat);

  // An RTOS's tasks (each one's share; a name narrows the profile to it), the interrupts'
  // invocations and the timeline: each section shown once the daemon has something for it.
  const tasksBox = h("div", {});
  const tasksSection = section("h-tasks", "Tasks (share of the samples)", tasksBox);
  const interruptsBox = h("div", {});
  const interruptsSection = section(
    "h-interrupts",
    "Interrupts (invocations, from entry/exit events)",
    interruptsBox,
  );
  // A slice clicked: a task on the running task's track narrows the profile to it; a function
  // (a task's call, a handler) is selected as in the flat profile.
  const timeline = timelineView(sid, (slice) =>
    slice.track.kind === "running" ? chooseTask(slice.name) : select(slice.name),
  );
  const timelineSection = section(
    "h-timeline",
    "Timeline (the running task, the interrupts, each task's calls)",
    ...timeline.nodes,
  );
  for (const s of [tasksSection, interruptsSection, timelineSection]) s.hidden = true;
  const renderRtos = async () => {
    const [tasks, interrupts] = await Promise.all([
      tasksAsked,
      decodable ? api.interrupts(sid).catch(() => undefined) : undefined,
    ]);
    if (tasks && hasTasks(tasks)) {
      replace(tasksBox, tasksTable(tasks, task, chooseTask));
      tasksSection.hidden = false;
    }
    if (interrupts?.exceptions.length) {
      replace(interruptsBox, interruptsTable(interrupts));
      interruptsSection.hidden = false;
    }
    if (hasTasks(tasks) || interrupts?.exceptions.length) {
      timelineSection.hidden = false;
      await timeline.show();
    }
  };
  // pprof's focus and hide on the drawing (regular expressions on function names).
  const graphInput = (name: string, hint: string) => {
    const input = h("input", {
      type: "search",
      class: `graph-${name}`,
      placeholder: `${name} (regex)`,
      title: hint,
      "aria-label": `call graph ${name}: ${hint}`,
    }) as HTMLInputElement;
    input.addEventListener("change", () => void renderGraph());
    return input;
  };
  const graphFocus = graphInput("focus", "the matching functions with their callers and callees");
  const graphIgnore = graphInput(
    "ignore",
    "leave out the matching functions and what only they call",
  );
  const graphHide = graphInput("hide", "leave the matching functions out");
  const viewButton = (label: string, title: string, act: (v: PanZoom) => void) =>
    h(
      "button",
      { type: "button", class: "graph-view", title, onclick: () => view && act(view) },
      label,
    );
  const graphSection = section(
    "h-graph",
    "Call graph",
    h(
      "div",
      { class: "graph-tools" },
      graphFocus,
      " ",
      graphIgnore,
      " ",
      graphHide,
      " ",
      viewButton("+", "zoom in", (v) => v.zoomBy(1.5)),
      viewButton("−", "zoom out", (v) => v.zoomBy(1 / 1.5)),
      viewButton("Fit", "the whole graph", (v) => v.reset()),
    ),
    h("div", { class: "grid graph-pair" }, graph, focus),
  );
  const flameSection = section(
    "h-flame",
    "Flame graph (icicle; stacks estimated as gprof attributes time)",
    flame,
  );
  const measuredSection = section(
    "h-cct",
    "Measured calling contexts (icicle in cycles, from entry/exit events)",
    measured,
    arcs,
  );
  // A probe's sampled stacks take the section's place, said so (samples, not cycles).
  const measuredTitle = measuredSection.querySelector("h2") ?? h("span", {});
  const sampledTitle = "Sampled stacks (icicle in samples, unwound from a debug probe's samples)";
  replace(
    main,
    ...header,
    syncSection(sid, profile),
    h(
      "p",
      { class: "meta" },
      `${seconds(profile.total_seconds)} s sampled (${count(profile.total_samples)} samples) · ${profile.flat.length} functions · ± is the 95 % Wilson score interval of each share (sampling error)`,
      // A probe link's intrusion, part of the result: how long it held the target halted.
      session.halted_share !== undefined
        ? h(
            "span",
            { id: "halted-share" },
            ` · the probe held the target halted ${(100 * session.halted_share).toFixed(1)} % of the time`,
          )
        : "",
    ),
    tasksSection,
    section(
      "h-flat",
      "Flat profile",
      search,
      h("table", { class: "data", id: "flat" }, h("thead", {}, headRow), flatBody),
    ),
    // Where entry/exit events measured the calling contexts, that exact view comes before
    // gprof's estimate of them (the flame graph); without events, a note after it says so.
    ...(session.calling_context_nodes
      ? [measuredSection, graphSection, flameSection]
      : [graphSection, flameSection, measuredSection]),
    timelineSection,
    interruptsSection,
    sourceSection,
    section(
      "h-cg",
      "Call graph table (as gprof prints it)",
      gprofTable(profile.call_graph, sid, graphTop, _params),
    ),
  );
  renderFlat();
  await Promise.all([
    renderFocus(),
    renderGraph(),
    renderFlame(),
    renderMeasured(),
    renderSource(),
    renderRtos(),
  ]);
  return timeline.stop;
}

// Each caller -> callee arc: the cycles measured along it and gprof's estimate (the callee's
// total split by calls); a difference of 5 points of the callee's time or more is highlighted.
function attributedArcsTable(arcs: AttributedArc[]) {
  const share = (x: number) => `${(100 * x).toFixed(1)} %`;
  const rows = [...arcs]
    .sort((a, b) => Math.abs(b.difference) - Math.abs(a.difference))
    .map((a) => {
      const off = Math.abs(a.measured_share - a.estimated_share) >= 0.05;
      return h(
        "tr",
        { class: off ? "misattributed" : undefined },
        h("td", {}, a.caller),
        h("td", {}, a.callee, a.incomplete ? h("span", { class: "tag" }, "incomplete") : ""),
        h("td", { class: "num" }, count(a.calls), "/", count(a.callee_calls)),
        h("td", { class: "num" }, count(a.measured), " (", share(a.measured_share), ")"),
        h(
          "td",
          { class: "num" },
          count(Math.round(a.estimated)),
          " (",
          share(a.estimated_share),
          ")",
        ),
        h(
          "td",
          { class: off ? "num worse" : "num" },
          (a.difference >= 0 ? "+" : "−") + count(Math.round(Math.abs(a.difference))),
        ),
      );
    });
  return [
    h("h3", {}, "Caller-attributed arcs: measured vs gprof's estimate"),
    h(
      "p",
      { class: "muted" },
      "gprof splits a callee's time among its callers by their calls; the measured column is the time the callee really spent when called from that caller (cycles, share of the callee's total).",
    ),
    h(
      "table",
      { class: "data", id: "cct-arcs-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "Caller"),
          h("th", {}, "Callee"),
          h("th", {}, "Calls"),
          h("th", {}, "Measured cycles"),
          h("th", {}, "gprof's estimate"),
          h("th", {}, "Difference"),
        ),
      ),
      h("tbody", {}, rows),
    ),
  ];
}

// Sampled stacks carry no calls and so no estimate: each caller -> callee edge's samples and its
// share of the callee's samples.
function sampledArcsTable(arcs: AttributedArc[]) {
  const rows = arcs
    .filter((a) => a.caller !== a.callee && a.measured > 0)
    .sort((a, b) => b.measured - a.measured)
    .map((a) =>
      h(
        "tr",
        {},
        h("td", {}, a.caller),
        h("td", {}, a.callee, a.incomplete ? h("span", { class: "tag" }, "incomplete") : ""),
        h(
          "td",
          { class: "num" },
          count(a.measured),
          " (",
          `${(100 * a.measured_share).toFixed(1)} %`,
          ")",
        ),
      ),
    );
  return [
    h("h3", {}, "Sampled caller → callee edges"),
    h(
      "p",
      { class: "muted" },
      "Samples whose stack held the edge, and their share of the callee's samples. Sampled: no call counts, and never added to measured cycles.",
    ),
    h(
      "table",
      { class: "data", id: "cct-arcs-table" },
      h(
        "thead",
        {},
        h("tr", {}, h("th", {}, "Caller"), h("th", {}, "Callee"), h("th", {}, "Samples")),
      ),
      h("tbody", {}, rows),
    ),
  ];
}

// A session captured without its ELF: upload the ELF here (or name one uploaded before) and
// attach it to the session, then the profile is drawn again with the functions named.
function attachForm(sid: number, reload: () => Promise<unknown>) {
  const result = h("div", { role: "status", id: "attach-result" });
  const attach = async (data: FormData) => {
    const file = data.get("elf") as File | null;
    let firmware = formText(data, "firmware").trim();
    if ((!file || !file.size) && !firmware)
      return replace(
        result,
        h(
          "p",
          { class: "error" },
          "Choose the session's ELF file, or give the id of firmware uploaded before.",
        ),
      );
    await attempt(result, "Attaching…", async () => {
      if (file && file.size) firmware = (await api.uploadFirmware(file)).id;
      await api.attachFirmware(sid, firmware);
      await reload();
    });
  };
  const attachFields = form(
    { id: "attach-form" },
    attach,
    h("label", {}, "ELF file ", h("input", { type: "file", name: "elf", id: "attach-elf" })),
    h(
      "label",
      {},
      "or uploaded firmware id ",
      h("input", { name: "firmware", id: "attach-id", size: 44, pattern: "[0-9a-f]*" }),
    ),
    h("button", { type: "submit" }, "Attach"),
  );
  return section(
    "h-attach",
    "Attach firmware",
    h(
      "p",
      { class: "muted" },
      "The ELF the board ran names the session's functions: upload it here, or give the id of firmware uploaded before (on the ",
      link("/firmware", "Firmware & import"),
      " page).",
    ),
    attachFields,
    result,
  );
}

// The synchronisation alarm: this session (a fixed sampling period) against another run sampled
// with a dithered period; a warning when their shares differ beyond sampling error.
function syncSection(sid: number, profile: Profile) {
  const check = profile.sync_check;
  const syncForm = form(
    { class: "inline", id: "sync-form" },
    (data) => {
      const ref = formText(data, "sync_reference").trim();
      if (/^\d+$/.test(ref))
        navigate(`/sessions/${sid}?${new URLSearchParams({ sync_reference: ref })}`);
    },
    h(
      "label",
      {},
      "Check sampling synchronisation against session ",
      h("input", {
        name: "sync_reference",
        inputmode: "numeric",
        size: 6,
        value: check ? String(check.reference) : "",
      }),
    ),
    " ",
    h("button", { type: "submit" }, "Check"),
    h(
      "span",
      { class: "muted", id: "sync-help" },
      " — a capture of the same build with the sampling period dithered (target-fw: " +
        "RACKPROF_SAMPLE_DITHER; the simulator: --dither). Shares that differ beyond " +
        "sampling error mean this fixed-period profile sees the program's phase, not its time.",
    ),
  );
  if (!check) return h("p", { class: "meta" }, syncForm);
  return h(
    "div",
    {},
    check.warning
      ? alertText(check.warning, { id: "sync-warning" })
      : h(
          "p",
          { class: "meta", id: "sync-ok" },
          `No synchronisation: shares agree with session ${check.reference} within sampling error (${check.test.functions_compared} functions).`,
        ),
    h("p", { class: "meta" }, syncForm),
  );
}

// gprof's call graph: for each function its callers above, itself (with its index), and its
// callees below, indented; names link to their own entries (those on the page).
function gprofTable(entries: GraphEntry[], sid: number, asked: number, params: URLSearchParams) {
  // Entries past the first `asked` are not on the page: their names are plain text.
  const shown = new Set(entries.map((e) => e.index));
  const ref = (text: string, index: number) =>
    shown.has(index)
      ? h("a", { href: `#cg-${index}`, class: "mono" }, text)
      : h("span", { class: "mono" }, text);
  const more = new URLSearchParams(params);
  more.set("graph_top", String(Math.min(asked * 10, 9_999_999)));
  const trimmed =
    entries.length >= asked
      ? h(
          "p",
          { class: "muted", id: "call-graph-trimmed" },
          `The ${entries.length} busiest entries (`,
          link(`/sessions/${sid}?${more}`, "show more", { id: "call-graph-more" }),
          "); the whole call graph is in the ",
          h("a", { href: `/api/v1/sessions/${sid}/export/text` }, "gprof text"),
          " and ",
          h("a", { href: `/api/v1/sessions/${sid}/profile` }, "JSON"),
          " downloads.",
        )
      : null;
  // Each line as gprof prints it: a call within the entry's cycle (or of itself) by its count
  // alone, names tagged with their cycle, numbers as printf writes them.
  const line = (e: GraphEntry) => (l: GraphLine) => {
    const [self, children, called, name] = gprofLineCells(e, l);
    return h(
      "tr",
      { class: "sub" },
      h("td", {}),
      h("td", {}),
      h("td", { class: "num" }, self),
      h("td", { class: "num" }, children),
      h("td", { class: "num" }, called),
      h("td", { class: "indent" }, ref(name, l.index)),
    );
  };
  return [
    trimmed,
    h(
      "div",
      { class: "scroll tall" },
      h(
        "table",
        { class: "data gprof", id: "call-graph-table" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["index", "% time", "self", "children", "called", "name"].map((t) =>
              h("th", { scope: "col" }, t),
            ),
          ),
        ),
        entries.map((e) =>
          h(
            "tbody",
            { id: `cg-${e.index}`, class: isOverhead(e.name) ? "overhead" : undefined },
            e.spontaneous
              ? h(
                  "tr",
                  { class: "sub" },
                  h("td", { colspan: 5 }),
                  h("td", { class: "indent muted" }, "<spontaneous>"),
                )
              : null,
            (e.parents ?? []).map(line(e)),
            h(
              "tr",
              { class: "primary" },
              h("td", {}, `[${e.index}]`),
              h("td", { class: "num" }, printfFixed(e.percent, 1)),
              h("td", { class: "num" }, printfFixed(e.self_seconds, 2)),
              h("td", { class: "num" }, printfFixed(e.children_seconds, 2)),
              h("td", { class: "num" }, gprofCalled(e.called, e.self_calls)),
              h(
                "td",
                { class: "mono" },
                e.members ? `${e.name} [${e.index}]` : gprofName(e.name, e.index, e.cycle),
                isOverhead(e.name) ? h("span", { class: "tag" }, "overhead") : "",
              ),
            ),
            (e.children ?? []).map(line(e)),
            (e.members ?? []).map((m) =>
              h(
                "tr",
                { class: "sub" },
                h("td", {}),
                h("td", {}),
                h("td", { class: "num" }, printfFixed(m.self_seconds, 2)),
                h("td", { class: "num" }, printfFixed(m.children_seconds, 2)),
                h("td", { class: "num" }, gprofCalled(m.called, m.self_calls)),
                h("td", { class: "indent" }, ref(gprofName(m.name, m.index, e.cycle), m.index)),
              ),
            ),
          ),
        ),
      ),
    ),
  ];
}

// The time window: the whole session, or its last seconds (the API's from=, on receive times).
export const kWindows = [10, 30, 60, 300];
function windowForm(params: URLSearchParams, last: number | undefined) {
  const choose = h(
    "select",
    {
      name: "last",
      id: "window",
      onchange: (e: Event) => {
        const query = new URLSearchParams(params);
        const value = (e.target as HTMLSelectElement).value;
        query.delete("task"); // a task's profile is of the whole session
        if (value) query.set("last", value);
        else query.delete("last");
        navigate(`${location.pathname}${query.size ? `?${query}` : ""}`);
      },
    },
    h("option", { value: "", selected: last === undefined }, "the whole session"),
    ...kWindows.map((s) =>
      h("option", { value: String(s), selected: last === s }, `its last ${s} s`),
    ),
  );
  return h(
    "p",
    { class: "meta", id: "window-line" },
    h("label", {}, "Profile of ", choose),
    last === undefined
      ? ""
      : h(
          "span",
          { class: "muted" },
          " (records received in that time; flat profile, call graph and flame graph alike)",
        ),
  );
}
