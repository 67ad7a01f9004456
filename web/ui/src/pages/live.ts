// Live session: top functions by self % and records/s over time from the session's WebSocket
// feed (4 snapshots a second), link and loss indicators, start and stop.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { api, feed, type LiveSnapshot } from "../api";
import { clock, count, isOverhead, label, percent } from "../format";
import { h, link, replace, section } from "../dom";
import { storageBadge } from "./rack";
import { navigate } from "../router";

const kHistory = 120; // points kept on the chart: 30 s at 4 snapshots a second

export async function livePage(main: HTMLElement, _params: URLSearchParams, id?: number) {
  if (id === undefined) return chooseSession(main);
  const session = await api.session(id);
  const title = h("h1", {}, `Live: ${session.board} · session ${id}`);
  const link_ = h("span", { class: "pill", id: "link-state" }, "connecting");
  const capture = h("span", { class: "pill", id: "capture-state" }, session.state);
  const storage = h(
    "span",
    { id: "storage-state" },
    storageBadge(session.storage_state, session.storage_error),
  );
  const rate = h("output", { id: "records-rate", class: "big" }, "—");
  const totals = h("dl", { class: "counters", id: "totals" });
  const losses = h("dl", { class: "counters", id: "losses" });
  const top = h("tbody");
  const message = h("p", { role: "status", class: "muted" });
  const stopButton = h(
    "button",
    { type: "button", id: "stop" },
    "Stop session",
  ) as HTMLButtonElement;
  const startButton = h(
    "button",
    { type: "button", id: "start" },
    "Start new session",
  ) as HTMLButtonElement;
  const chartBox = h("div", {
    class: "chart",
    "aria-label": "records per second, last 30 s",
    role: "img",
  });

  const stopSession = async () => {
    stopButton.disabled = true;
    try {
      await api.stopSession(id);
      message.textContent = `Session ${id} stopped.`;
    } catch (e) {
      message.textContent = (e as Error).message;
      stopButton.disabled = false;
    }
  };
  const startSession = async () => {
    startButton.disabled = true;
    try {
      const next = await api.startSession(session.board);
      navigate(`/live/${next.id}`);
    } catch (e) {
      message.textContent = (e as Error).message;
      startButton.disabled = false;
    }
  };
  stopButton.addEventListener("click", () => void stopSession());
  startButton.addEventListener("click", () => void startSession());

  replace(
    main,
    title,
    h(
      "p",
      {},
      "Link ",
      link_,
      " · capture ",
      capture,
      storage,
      " · ",
      link(`/sessions/${id}`, "full profile"),
    ),
    h(
      "div",
      { class: "grid" },
      section(
        "h-rate",
        ["Records/s ", rate],
        chartBox,
        h("div", { class: "buttons" }, stopButton, startButton),
        message,
        h("h2", {}, "Totals"),
        totals,
        h("h2", {}, "Losses"),
        losses,
      ),
      section(
        "h-top",
        "Top functions by self time",
        h(
          "table",
          { class: "data", id: "top-functions" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Function"),
              h("th", { scope: "col", class: "num" }, "Self %"),
              h("th", { scope: "col", class: "num" }, "Calls"),
            ),
          ),
          top,
        ),
      ),
    ),
  );

  const xs: number[] = [];
  const ys: number[] = [];
  const chart = new uPlot(
    {
      width: 560,
      height: 220,
      scales: { x: { time: true } },
      legend: { show: false },
      series: [
        {},
        { label: "records/s", stroke: "#2563eb", fill: "rgba(37,99,235,0.12)", width: 2 },
      ],
      // Times of day as the other pages write them, far enough apart to read.
      axes: [{ values: (_u, splits) => splits.map(clock), space: 90 }, { size: 70 }],
    },
    [xs, ys],
    chartBox,
  );

  const onSnapshot = (s: LiveSnapshot) => {
    capture.textContent = label(s.state); // "not capturing", not the API's not_capturing
    capture.className = `pill ${s.state === "capturing" ? "ok" : "warn"}`;
    stopButton.disabled = s.state !== "capturing";
    if (s.state !== "capturing") {
      rate.textContent = "—"; // stopped: no rate, not the last one seen
      return;
    }
    replace(storage, storageBadge(s.storage_state, s.storage_error));
    link_.textContent = s.link ?? "?";
    link_.className = `pill ${s.link === "connected" ? "ok" : "warn"}`;
    rate.textContent = count(s.records_per_s ?? 0);
    xs.push(Date.now() / 1000);
    ys.push(s.records_per_s ?? 0);
    if (xs.length > kHistory) {
      xs.shift();
      ys.shift();
    }
    chart.setData([xs, ys]);
    replace(totals, entries(s.totals));
    replace(losses, entries(s.losses, true));
    replace(
      top,
      (s.top_functions ?? []).map((f) =>
        h(
          "tr",
          { class: isOverhead(f.name) ? "overhead" : "" },
          h(
            "th",
            { scope: "row", class: "mono" },
            f.name,
            isOverhead(f.name) ? h("span", { class: "tag" }, "overhead") : "",
          ),
          h(
            "td",
            { class: "num" },
            percent(f.self_percent),
            h("span", { class: "bar", style: `width:${Math.min(100, f.self_percent)}%` }),
          ),
          h("td", { class: "num" }, count(f.calls)),
        ),
      ),
    );
  };
  const stop = feed<LiveSnapshot>(`/api/v1/sessions/${id}/live`, onSnapshot, (open) => {
    if (!open) {
      link_.textContent = "feed closed";
      link_.className = "pill warn";
    }
  });
  return () => {
    stop();
    chart.destroy();
  };
}

function entries(counters: Record<string, number> | undefined, lossy = false) {
  return Object.entries(counters ?? {}).map(([k, v]) => [
    h("dt", {}, label(k)),
    h("dd", { class: lossy && v > 0 ? "warn" : "" }, count(v)),
  ]);
}

// /live without a session: the sessions capturing now.
async function chooseSession(main: HTMLElement) {
  const boards = await api.boards();
  const live = boards.filter((b) => b.session);
  replace(
    main,
    h("h1", {}, "Live"),
    live.length
      ? h(
          "ul",
          { class: "choices" },
          live.map((b) =>
            h(
              "li",
              {},
              link(`/live/${b.session}`, `${b.name} · session ${b.session}`),
              ` (${b.state})`,
            ),
          ),
        )
      : h("p", {}, "No board is capturing. Start a session from the ", link("/", "Rack"), " page."),
  );
}
