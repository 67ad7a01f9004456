import { describe, expect, it } from "vitest";
import type { Diff } from "../api";
import { changeText, compareRedirect, methodText } from "./diff";

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

describe("methodText", () => {
  it("says the method once: the test, its normalization and alpha are not repeated", () => {
    const description =
      "exact conditional binomial test of two Poisson rates (a function's samples per call of " +
      "the whole program in a and in b), two-sided, Bonferroni-corrected over the 4 functions " +
      "with samples, family-wise alpha 0.01";
    const diff = {
      test: {
        name: "exact conditional binomial test of two rates, Bonferroni",
        alpha: 0.01,
        description,
      },
    } as unknown as Diff;
    const text = methodText(diff);
    expect(text).toBe(`Method: ${description}.`);
    expect(text.match(/Bonferroni/g)).toHaveLength(1);
    expect(text.match(/per call/g)).toHaveLength(1);
    expect(text.match(/alpha/g)).toHaveLength(1);
  });
});
