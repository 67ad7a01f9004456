import { describe, expect, it } from "vitest";
import { changeText, compareRedirect } from "./diff";

describe("compareRedirect", () => {
  it("opens the old Compare page's two sessions on the Diff page", () => {
    expect(compareRedirect(new URLSearchParams("a=3&b=4"))).toBe(
      "/diff?a=session%3D3&b=session%3D4",
    );
  });
  it("drops what is not a session id", () => {
    expect(compareRedirect(new URLSearchParams("a=x&b=4"))).toBe("/diff?b=session%3D4");
    expect(compareRedirect(new URLSearchParams("a=3;drop"))).toBe("/diff");
    expect(compareRedirect(new URLSearchParams(""))).toBe("/diff");
  });
});

describe("changeText", () => {
  it("says new only for what B has and A has not", () => {
    expect(changeText(null, 0, 1.5)).toBe("new");
  });
  it("says nothing changed when neither side has any (not new)", () => {
    expect(changeText(null, 0, 0)).toBe("—");
  });
  it("gives a function only in A its full fall, not new", () => {
    expect(changeText(-1, 2.5, 0)).toBe("−100.0 %");
  });
  it("signs a change, and marks none as ±", () => {
    expect(changeText(0.25, 1, 1.25)).toBe("+25.0 %");
    expect(changeText(0, 1, 1)).toBe("±0.0 %");
  });
});
