import { describe, expect, it } from "vitest";
import { compareValues, type SortValue } from "./sort";

const sorted = (values: SortValue[]) => [...values].sort(compareValues);

describe("compareValues", () => {
  it("orders numbers by value, not as text", () => {
    expect(sorted([10, 9, 100, 0.5])).toEqual([0.5, 9, 10, 100]);
  });
  it("orders text alphabetically", () => {
    expect(sorted(["gamma", "alpha", "beta"])).toEqual(["alpha", "beta", "gamma"]);
  });
  it("puts missing values first", () => {
    expect(compareValues(null, 0)).toBeLessThan(0);
    expect(compareValues(5, undefined)).toBeGreaterThan(0);
    expect(compareValues(null, null)).toBe(0);
    expect(sorted([3, null, 1])).toEqual([null, 1, 3]);
  });
  it("compares equal values as equal", () => {
    expect(compareValues(2, 2)).toBe(0);
    expect(compareValues("x", "x")).toBe(0);
  });
});
