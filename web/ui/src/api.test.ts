import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { windowQuery } from "./api";

// api.ts keeps the export formats it fetched: each test loads it afresh.
const load = async () => {
  vi.resetModules();
  return import("./api");
};

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

let fetchMock: ReturnType<typeof vi.fn<typeof fetch>>;
let stored: Map<string, string>;

beforeEach(() => {
  fetchMock = vi.fn<typeof fetch>();
  stored = new Map();
  vi.stubGlobal("fetch", fetchMock);
  vi.stubGlobal("localStorage", {
    getItem: (k: string) => stored.get(k) ?? null,
    setItem: (k: string, v: string) => void stored.set(k, v),
    removeItem: (k: string) => void stored.delete(k),
  });
});
afterEach(() => {
  vi.unstubAllGlobals();
});

describe("requests", () => {
  it("asks for sessions with the filter as a query and returns the JSON", async () => {
    const { api } = await load();
    fetchMock.mockResolvedValueOnce(json([{ id: 3 }]));
    await expect(api.sessions({ board: "b1", state: "completed" })).resolves.toEqual([{ id: 3 }]);
    expect(fetchMock).toHaveBeenCalledExactlyOnceWith("/api/v1/sessions?board=b1&state=completed", {
      method: "GET",
      body: undefined,
      headers: {},
    });
  });

  it("sends the saved token, and JSON bodies with their type", async () => {
    const { api, apiToken } = await load();
    apiToken.set("s3cret");
    expect(stored.get("rackprof.token")).toBe("s3cret");
    fetchMock.mockResolvedValueOnce(json({ name: "m4-2" }, 201));
    await api.addBoard({ name: "m4-2", link: "sim://" });
    expect(fetchMock).toHaveBeenCalledExactlyOnceWith("/api/v1/boards", {
      method: "POST",
      body: '{"name":"m4-2","link":"sim://"}',
      headers: { "Content-Type": "application/json", Authorization: "Bearer s3cret" },
    });
    apiToken.set("");
    expect(apiToken.get()).toBe("");
  });

  it("builds the profile's query from its options", async () => {
    const { api } = await load();
    fetchMock.mockImplementation(() => Promise.resolve(json({ call_graph: [] })));
    await api.profile(7);
    await api.profile(7, 8, 500);
    expect(fetchMock.mock.calls.map((c) => c[0])).toEqual([
      "/api/v1/sessions/7/profile?graph_top=50",
      "/api/v1/sessions/7/profile?graph_top=500&sync_reference=8",
    ]);
  });

  it("turns the API's error into an ApiError, with a hint for 401", async () => {
    const { api, ApiError } = await load();
    fetchMock.mockResolvedValueOnce(
      json({ error: { code: "unauthorized", message: "a token is required" } }, 401),
    );
    const failure = api.stopSession(4);
    await expect(failure).rejects.toBeInstanceOf(ApiError);
    await expect(failure).rejects.toMatchObject({
      status: 401,
      code: "unauthorized",
      message: "a token is required (set the API token at the top right)",
    });
  });

  it("says so when the reply is not JSON, and returns nothing for 204", async () => {
    const { api } = await load();
    fetchMock.mockResolvedValueOnce(new Response("<html>bad gateway</html>", { status: 502 }));
    await expect(api.boards()).rejects.toMatchObject({
      status: 502,
      code: "bad_reply",
      message: "GET /api/v1/boards: 502 (not JSON)",
    });
    fetchMock.mockResolvedValueOnce(new Response(null, { status: 204 }));
    await expect(api.stopSession(4)).resolves.toBeUndefined();
  });

  it("returns a text export as text, or the API's error", async () => {
    const { api } = await load();
    fetchMock.mockResolvedValueOnce(new Response("main;work 5\n"));
    await expect(api.sessionFolded(2)).resolves.toBe("main;work 5\n");
    fetchMock.mockResolvedValueOnce(
      json({ error: { code: "no_cct", message: "no calling-context tree" } }, 422),
    );
    await expect(api.sessionCctFolded(2)).rejects.toMatchObject({
      status: 422,
      code: "no_cct",
      message: "no calling-context tree",
    });
    expect(fetchMock.mock.calls.map((c) => c[0])).toEqual([
      "/api/v1/sessions/2/export/folded",
      "/api/v1/sessions/2/export/cct-folded",
    ]);
  });
});

describe("export formats", () => {
  it("reads the formats the daemon's OpenAPI document enumerates, once", async () => {
    const { exportFormats } = await load();
    const formats = (values: string[]) => ({
      get: { parameters: [{ name: "format", schema: { enum: values } }] },
    });
    fetchMock.mockResolvedValueOnce(
      json({
        paths: {
          "/api/v1/sessions/{id}/export/{format}": formats(["gmon", "csv", "newfmt"]),
          "/api/v1/profile/export/{format}": formats(["gmon"]),
        },
      }),
    );
    await expect(exportFormats()).resolves.toEqual({
      session: ["gmon", "csv", "newfmt"],
      selection: ["gmon"],
    });
    await exportFormats();
    expect(fetchMock).toHaveBeenCalledTimes(1);
  });

  it("falls back to the formats this dashboard knows", async () => {
    const { exportFormats } = await load();
    fetchMock.mockRejectedValueOnce(new TypeError("network down"));
    const { session, selection } = await exportFormats();
    expect(session).toContain("raw");
    expect(selection).not.toContain("raw");
    expect(selection).toContain("cct-pprof");
  });

  it("labels and links a session's downloads", async () => {
    const { downloads, formatLabel } = await load();
    expect(downloads(7, ["gmon", "csv", "speedscope"])).toEqual([
      { format: "gmon", label: "gmon.out", href: "/api/v1/sessions/7/export/gmon" },
      { format: "csv", label: "CSV", href: "/api/v1/sessions/7/export/csv" },
      { format: "speedscope", label: "speedscope", href: "/api/v1/sessions/7/export/speedscope" },
    ]);
    expect(formatLabel("cct-json")).toBe("measured calling contexts (JSON)");
  });
});

describe("windowQuery", () => {
  it("writes Unix-ns bounds as whole numbers, leaving open bounds out", () => {
    expect(windowQuery({})).toEqual({});
    expect(windowQuery({ from: 1.7642e18 })).toEqual({ from: "1764200000000000000" });
    expect(windowQuery({ from: 10.5, to: 20.5 })).toEqual({ from: "10", to: "21" });
  });
});

describe("the calling-context tree's numbers, by unit", () => {
  const arc = (unit: string) => ({
    caller: "slow",
    callee: "doSomething",
    calls: unit === "cycles" ? 40 : 0,
    callee_calls: unit === "cycles" ? 80 : 0,
    [`callee_total_${unit}`]: 1000,
    [`measured_${unit}`]: 900,
    [`estimated_${unit}`]: unit === "cycles" ? 500 : 0,
    [`difference_${unit}`]: unit === "cycles" ? 400 : 900,
    measured_share: 0.9,
    estimated_share: unit === "cycles" ? 0.5 : 0,
    incomplete: false,
  });
  it.each(["cycles", "samples"])("reads a tree in %s into one shape", async (unit) => {
    const { contextOf } = await load();
    const c = contextOf({
      calling_context: {
        arcs: [arc(unit)],
        incomplete_nodes: 1,
        nodes: 7,
        [`total_${unit}`]: 1234,
        unit,
      },
    });
    expect(c.unit).toBe(unit);
    expect(c.total).toBe(1234);
    expect(c.arcs[0].measured).toBe(900);
    expect(c.arcs[0].callee_total).toBe(1000);
    expect(c.arcs[0].calls).toBe(unit === "cycles" ? 40 : 0);
    expect(c.nodes).toBe(7);
  });
  it("takes a file without a unit (written before there were samples) as cycles", async () => {
    const { contextOf } = await load();
    const c = contextOf({
      calling_context: { arcs: [arc("cycles")], incomplete_nodes: 0, nodes: 3, total_cycles: 9 },
    });
    expect(c.unit).toBe("cycles");
    expect(c.total).toBe(9);
  });
});
