import { describe, expect, it } from "vitest";
import type { Session } from "./api";
import { buildSelection, buildsOf, shortId } from "./selection";

const session = (id: number, board: string, build_id: string | null) =>
  ({ id, board, build_id }) as Session;

describe("buildsOf", () => {
  it("groups sessions by build-id, the build with most sessions first", () => {
    const builds = buildsOf([
      session(1, "b2", "aaaa"),
      session(2, "b1", "aaaa"),
      session(3, "b1", "bbbb"),
      session(4, "b3", null),
      session(5, "b1", "aaaa"),
    ]);
    expect(builds.map((b) => b.build_id)).toEqual(["aaaa", "bbbb"]);
    expect(builds[0].sessions.map((s) => s.id)).toEqual([1, 2, 5]);
    expect(builds[0].boards).toEqual(["b1", "b2"]);
    expect(builds[1].sessions.map((s) => s.id)).toEqual([3]);
    expect(builds[1].boards).toEqual(["b1"]);
  });
  it("orders builds with as many sessions by build-id", () => {
    const builds = buildsOf([session(1, "b1", "ffff"), session(2, "b1", "0000")]);
    expect(builds.map((b) => b.build_id)).toEqual(["0000", "ffff"]);
  });
  it("leaves out sessions without a build-id", () => {
    expect(buildsOf([session(1, "b1", null)])).toEqual([]);
    expect(buildsOf([])).toEqual([]);
  });
});

describe("buildSelection", () => {
  it("names the build alone", () => {
    expect(buildSelection("ab12")).toBe("build_id=ab12");
  });
  it("narrows to boards and tags as comma lists, commas unescaped", () => {
    expect(buildSelection("ab12", ["b1", "b2"], ["lab"])).toBe("build_id=ab12&board=b1,b2&tag=lab");
    expect(buildSelection("ab12", [], ["lab", "night"])).toBe("build_id=ab12&tag=lab,night");
  });
  it("escapes everything else", () => {
    expect(buildSelection("ab12", ["rack 1"], ["a&b"])).toBe(
      "build_id=ab12&board=rack+1&tag=a%26b",
    );
  });
});

describe("shortId", () => {
  it("keeps the first 12 hex digits", () => {
    expect(shortId("0123456789abcdef0123")).toBe("0123456789ab");
    expect(shortId("abc")).toBe("abc");
  });
  it("names a missing build", () => {
    expect(shortId(null)).toBe("unknown build");
    expect(shortId(undefined)).toBe("unknown build");
    expect(shortId("")).toBe("unknown build");
  });
});
