// Rack: every board with its link state, records/s, current session, counters and last error.
// The events feed refreshes at once on a change; a 1 s poll keeps the rates moving.
import { api, feed, type Board, type BoardEvent } from "../api";
import { count, label, time } from "../format";
import { attempt, form, formText, h, link, replace, section, selectField } from "../dom";

const records = (b: Board) =>
  b.counters ? (b.counters.arcs ?? 0) + (b.counters.pc_samples ?? 0) : 0;

export async function rackPage(main: HTMLElement) {
  const table = h("tbody");
  const events = h(
    "ol",
    { class: "events", "aria-live": "polite" },
    h("li", { class: "muted" }, "No link or session change since this page opened."),
  );
  const feedState = h("span", { class: "pill" }, "connecting");
  const status = h("p", { class: "error", role: "alert" });
  // The protocol of each board's session (its counters depend on it), asked once per session.
  const protocols = new Map<number, string>();
  replace(
    main,
    h("h1", {}, "Rack"),
    h(
      "table",
      { class: "data", id: "boards" },
      h("caption", {}, "Boards"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Board", "Link", "State", "Records/s", "Session", "Counters", "Last error", ""].map(
            (t) => h("th", { scope: "col" }, t),
          ),
        ),
      ),
      table,
    ),
    status,
    addBoardForm(() => refresh()),
    h("h2", {}, "Events ", feedState),
    events,
  );

  // Each board's counts over the last seconds: the rate is taken over that window, not
  // between two polls (counters move in bursts, and a rate between polls zig-zagged).
  let last = new Map<string, Seen[]>();
  const refresh = async () => {
    let boards: Board[];
    try {
      boards = await api.boards();
      status.textContent = "";
    } catch (e) {
      status.textContent = `Cannot read the boards: ${(e as Error).message}`;
      return;
    }
    await Promise.all(
      boards
        .filter((b) => b.session !== null && !protocols.has(b.session))
        .map((b) =>
          api.session(b.session as number).then(
            (s) => protocols.set(s.id, s.protocol),
            () => undefined, // shown with every counter until it can be read
          ),
        ),
    );
    const now = performance.now();
    const next = new Map<string, Seen[]>();
    replace(
      table,
      boards.map((b) => {
        const seen = [
          ...(last.get(b.name) ?? []),
          { at: now, records: records(b), session: b.session },
        ];
        const window = recentWindow(seen, now);
        next.set(b.name, window);
        const rate = windowRate(window);
        return h(
          "tr",
          { "data-board": b.name },
          h("th", { scope: "row" }, b.name),
          h("td", { class: "mono" }, b.link),
          h(
            "td",
            {},
            h("span", { class: `state state-${b.state}` }, b.state),
            b.reconnects ? ` (${b.reconnects} reconnects)` : "",
            storageBadge(b.storage_state, b.storage_error),
          ),
          h("td", { class: "num", "data-col": "rate" }, rate === null ? "—" : count(rate)),
          h("td", {}, b.session ? link(`/live/${b.session}`, `#${b.session}`) : "—"),
          h(
            "td",
            {},
            counterList(b.counters, b.session === null ? undefined : protocols.get(b.session)),
          ),
          h(
            "td",
            { class: b.last_error || b.storage_error ? "error" : "muted" },
            b.storage_error ?? (b.last_error || "none"),
          ),
          h(
            "td",
            {},
            b.session
              ? link(`/sessions/${b.session}`, "Profile")
              : h(
                  "button",
                  { type: "button", class: "start", onclick: () => void start(b.name) },
                  "Start session",
                ),
          ),
        );
      }),
    );
    last = next;
  };
  const start = async (board: string) => {
    try {
      await api.startSession(board);
    } catch (e) {
      status.textContent = `Cannot start a session on ${board}: ${(e as Error).message}`;
    }
    await refresh();
  };
  await refresh();
  const poll = window.setInterval(() => void refresh(), 1000);
  const stop = feed<BoardEvent>(
    "/api/v1/events",
    (e) => {
      events.querySelector("li.muted")?.remove();
      events.prepend(
        h(
          "li",
          {},
          h("time", {}, time(e.at_ns)),
          " ",
          h("strong", {}, e.board),
          ` ${e.kind}: ${e.state}`,
          e.session ? ` (session ${e.session})` : "",
          e.reason ? ` — ${e.reason}` : "",
        ),
      );
      while (events.children.length > 20) events.lastElementChild?.remove();
      void refresh();
    },
    (open) => {
      feedState.textContent = open ? "live" : "reconnecting";
      feedState.className = open ? "pill ok" : "pill warn";
    },
  );
  return () => {
    window.clearInterval(poll);
    stop();
  };
}

// While the database's commits fail: a visible mark, the database's message on hover.
export function storageBadge(state: string | undefined, error: string | null | undefined) {
  if (state !== "storage_error") return "";
  return h(
    "span",
    { class: "state state-storage_error", title: error ?? "", "data-storage": "storage_error" },
    " · storage error: data is being lost",
  );
}

// The counters that tell how a board of each protocol is doing; the others stay 0 for it.
const totalsOf: Record<string, string[]> = {
  legacy: ["bytes_in", "arcs", "pc_samples"],
  framed: ["bytes_in", "frames", "arcs", "pc_samples"],
  itm: ["bytes_in", "arcs", "pc_samples", "sleep_samples"],
};
// Data received or sent that never became a record (storage/counters.h marks them).
const losses = new Set([
  "bytes_discarded",
  "resyncs",
  "gaps",
  "records_lost",
  "bytes_lost",
  "frames_bad",
  "frames_lost",
  "target_dropped",
  "overflows",
  "records_lost_storage",
  "bytes_lost_storage",
]);
const isLoss = (k: string) => losses.has(k) || /discard|lost|resync|gap|drop|overflow|bad/.test(k);

// A board's counters: the totals that matter for its protocol, then every other counter that
// is not zero (losses of any protocol, TPIU frames of an itm board, any counter the daemon adds
// later), and "losses: none" when no loss is shown. With the protocol unknown, every counter.
export function counterList(
  counters: Record<string, number> | null | undefined,
  protocol?: string,
) {
  if (!counters) return h("span", { class: "muted" }, "no session");
  const totals = protocol ? totalsOf[protocol] : undefined;
  const shown = totals
    ? [
        ...totals.filter((k) => k in counters).map((k) => [k, counters[k]] as const),
        ...Object.entries(counters).filter(([k, v]) => v > 0 && !totals.includes(k)),
      ]
    : Object.entries(counters);
  const lossFree = totals !== undefined && !shown.some(([k]) => isLoss(k));
  return h(
    "dl",
    { class: "counters", "data-protocol": protocol },
    shown.map(([k, v]) => [
      h("dt", {}, label(k)),
      h(
        "dd",
        { class: isLoss(k) && v > 0 ? "warn" : "", "data-counter": k },
        // A probe link's halted time (samples_halted_ns): the intrusion, in seconds.
        k.endsWith("_ns") ? `${(v / 1e9).toFixed(3)} s` : count(v),
      ),
    ]),
    lossFree
      ? [h("dt", {}, "losses"), h("dd", { class: "ok", "data-counter": "losses" }, "none")]
      : null,
  );
}

// A board added through the API (POST /api/v1/boards), kept in the daemon's database. Over
// HTTP a board may link only where the configuration's server.api_links allows, and name
// firmware uploaded before; the API's refusal is shown as it says it.
function addBoardForm(refresh: () => Promise<void>) {
  const result = h("div", { role: "status", id: "add-board-result" });
  const addBoard = async (data: FormData, added: HTMLFormElement) => {
    const board: Record<string, string | number | boolean> = {
      name: formText(data, "name").trim(),
      link: formText(data, "link").trim(),
      protocol: formText(data, "protocol"),
      autostart: data.get("autostart") === "on",
    };
    if (board.protocol === "legacy") board.format = formText(data, "format");
    if (data.get("addr_bytes")) board.addr_bytes = Number(data.get("addr_bytes"));
    const firmware = formText(data, "firmware").trim();
    if (firmware) board.firmware = firmware;
    await attempt(
      result,
      "Adding…",
      async () => {
        await api.addBoard(board);
        replace(result, h("p", {}, `Added board ${board.name}.`));
        added.reset();
        await refresh();
      },
      "Cannot add the board: ",
    );
  };
  const fields = form(
    { id: "add-board" },
    addBoard,
    h(
      "label",
      {},
      "Name ",
      h("input", { name: "name", required: true, size: 14, placeholder: "m4-2" }),
    ),
    h(
      "label",
      {},
      "Link ",
      h("input", {
        name: "link",
        required: true,
        size: 36,
        placeholder: "serial:///dev/ttyUSB0?baud=1500000",
        class: "mono",
      }),
    ),
    selectField("Protocol ", "protocol", ["legacy", "framed", "itm"]),
    selectField("Format ", "format", ["bin", "hex"]),
    selectField("Address bytes ", "addr_bytes", [["", "default"], "3", "4"]),
    h(
      "label",
      {},
      "Firmware ",
      h("input", {
        name: "firmware",
        size: 20,
        pattern: "[0-9a-f]*",
        placeholder: "optional: uploaded id",
      }),
    ),
    h(
      "label",
      {},
      h("input", { type: "checkbox", name: "autostart", checked: true }),
      " start capturing when the link is up",
    ),
    h("button", { type: "submit" }, "Add board"),
  );
  return section(
    "h-add-board",
    "Add a board",
    h(
      "p",
      { class: "muted" },
      "Kept in the daemon's database. Over the API a board may link only where the configuration's ",
      h("code", {}, "server.api_links"),
      " allows (by default /dev/rackprof/*, /dev/ttyUSB*, /dev/ttyACM*, TCP on loopback and sim://); firmware comes from the ",
      link("/firmware", "uploaded images"),
      ".",
    ),
    fields,
    result,
  );
}

// A board's records count at one poll.
export interface Seen {
  at: number; // ms (performance.now())
  records: number;
  session: number | null;
}

// The polls of the last kRateWindowMs of the board's current session.
export const kRateWindowMs = 5000;
export function recentWindow(seen: Seen[], now: number): Seen[] {
  const newest = seen[seen.length - 1];
  const kept = seen.filter((s) => s.session === newest?.session && now - s.at <= kRateWindowMs);
  return kept.length ? kept : seen.slice(-1);
}

// Records per second over the window; null until it spans half a second (one burst would be
// the whole rate).
export function windowRate(window: Seen[]): number | null {
  if (window.length < 2) return null;
  const first = window[0];
  const last = window[window.length - 1];
  const ms = last.at - first.at;
  return ms >= 500 ? ((last.records - first.records) * 1000) / ms : null;
}
