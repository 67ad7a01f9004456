import { describe, expect, it } from "vitest";
import { pValue } from "./fleet";

describe("pValue", () => {
  it("prints four decimals, small values in exponent form", () => {
    expect(pValue(0.5)).toBe("0.5000");
    expect(pValue(0.01234)).toBe("0.0123");
    expect(pValue(1e-4)).toBe("0.0001");
    expect(pValue(0.0000123)).toBe("1.2e-5");
  });
  it("prints 0 as the underflow it is", () => {
    expect(pValue(0)).toBe("< 1e-300");
  });
});
